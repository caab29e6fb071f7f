"""The real value of a logarithmic slider for screen readers (issue #35, item 12).

β and γ are chosen on sliders over log10 of the value (:func:`app.mainview.controls.log_slider`);
the page's slider library says the position, so a screen reader read "0.3" for β = 2.
:class:`RealValueAria` hooks every slider of class :data:`LOG_SLIDER_CLASS` on the page
and, each time the slider library updates a handle's ARIA attributes, replaces them with
the value itself (``aria-valuenow``, ``aria-valuetext``, ``aria-valuemin``,
``aria-valuemax``: 10 to the power of the position, three significant digits).
"""

from __future__ import annotations

from panel.custom import JSComponent

#: CSS class of the sliders over log10 of a value.
LOG_SLIDER_CLASS = "log10-slider"


class RealValueAria(JSComponent):
    """Placed once on the page (it draws nothing): real values in the ARIA attributes
    of the logarithmic sliders, including sliders drawn later (checked every second)."""

    _esm = """
    export function render({ model }) {
      const hooked = new WeakSet();
      const real = (v) => String(Number(Math.pow(10, Number(v)).toPrecision(3)));
      const hook = () => {
        if (!(window.Bokeh && Bokeh.index)) return;
        const views = Bokeh.index.query(v => v._noUiSlider != null && v.slider_el != null
            && (v.model.css_classes || []).includes(LOG_CLASS));
        for (const view of views) {
          const slider = view._noUiSlider;
          if (hooked.has(slider)) continue;
          hooked.add(slider);
          // (after the library's own ARIA update: listeners run in the order bound,
          // and binding "update" runs it once at once)
          slider.on("update.realvalue", (values, handle, unencoded) => {
            view.slider_el.querySelectorAll(".noUi-handle").forEach((el, k) => {
              const text = real(unencoded[k]);
              el.setAttribute("aria-valuenow", text);
              el.setAttribute("aria-valuetext", text);
              el.setAttribute("aria-valuemin", real(view.model.start));
              el.setAttribute("aria-valuemax", real(view.model.end));
            });
          });
        }
      };
      hook();
      const timer = setInterval(hook, 1000);
      model.on("remove", () => clearInterval(timer));
      return document.createElement("span");
    }
    """.replace("LOG_CLASS", repr(LOG_SLIDER_CLASS))
