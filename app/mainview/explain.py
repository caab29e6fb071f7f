"""The explanation panels: the equations of models, read from their specs.

Title, equations (HTML with KaTeX ``$…$`` / ``$$…$$``) and "look for" are the model's
:class:`~dynamics.models.ModelSpec` fields; the panel adds a link to the model's section
of the Theory page (:mod:`app.teaching.theory`), where the common ground (scores, softmax, free
energy, the Fisher–Rao flow) is explained once. Rendered by KaTeX with its stylesheet
inside the pane (:mod:`app.serving.katex`). The main tab shows the selected model
(:class:`Explanation`), the inertial lab every model of Part II (:func:`models_text`).
"""

from __future__ import annotations

import html

import panel as pn
import param

from app.models import spec
from app.serving import katex
from app.teaching.theory import PARTS
from dynamics import Settings, models


def model_text(name: str) -> str:
    """The panel's HTML for model ``name``: title, equations, look-for and Theory link.

    Parameters
    ----------
    name : str
        A registered model.

    Returns
    -------
    str
        HTML with KaTeX math; the link is ``<a href="#<spec.section>">`` (an in-app
        link to the Theory page, see :class:`app.teaching.theory.TheoryLinks`).
    """
    s = spec(name)
    look = f"<p><i>Look for:</i> {html.escape(s.look_for)}</p>" if s.look_for else ""
    return (f"<h3>Model: {html.escape(s.title)}</h3>{s.equations}{look}"
            f'<p class="theory-link"><a href="#{html.escape(s.section)}">'
            f"Theory page: {html.escape(s.title)} ▸</a> (scores, softmax, free energy and "
            "the Fisher–Rao flow are explained there)</p>")


def models_text(part: int) -> str:
    """HTML of every registered model of one part of the theory: for the inertial lab.

    Parameters
    ----------
    part : int
        1 or 2.

    Returns
    -------
    str
        A link to the part's section of the Theory page (:data:`app.teaching.theory.PARTS`),
        then per model (registry order) its title, equations, look-for and a link to its
        section of the Theory page.
    """
    sections = []
    for s in models.specs(part=part):
        look = f"<p><i>Look for:</i> {html.escape(s.look_for)}</p>" if s.look_for else ""
        sections.append(
            f"<hr>{s.equations}{look}"
            f'<p class="theory-link"><a href="#{html.escape(s.section)}">'
            f"Theory page: {html.escape(s.title)} ▸</a></p>")
    anchor, heading = next((a, h) for p, a, h in PARTS if p == part)
    return (f'<h3>The models of this tab</h3><p class="theory-link">'
            f'<a href="#{anchor}">Theory page: {html.escape(heading)} ▸</a> (what the plots '
            "show and why)</p>" + "".join(sections))


class Explanation(pn.viewable.Viewer):
    """The equations of ``settings.model``."""

    settings = param.ClassSelector(class_=Settings, doc="The settings whose model is shown.")

    def __init__(self, stylesheets=(), **params):
        super().__init__(**params)
        self.pane = pn.pane.LaTeX(self._text(), renderer="katex", sizing_mode="stretch_width",
                                  css_classes=["explain"],
                                  stylesheets=[katex.STYLESHEET, *stylesheets])

    def _text(self) -> str:
        return model_text(self.settings.model)

    @param.depends("settings.model", watch=True)
    def _update(self):
        self.pane.object = self._text()

    def __panel__(self):
        return self.pane
