"""The explanation panel: the equations of the selected model (MODEL.md §1-§9).

Rendered with KaTeX through ``pn.pane.LaTeX`` (HTML with ``$…$`` / ``$$…$$`` math).
"""

from __future__ import annotations

import panel as pn
import param

from dynamics import Settings

_COMMON = r"""
<p><b>Scores, softmax, free energy</b> (§1): $S = X M X^\top$,
$A^* = \mathrm{rowsoftmax}(\beta S)$,
$$F(A;X) = \sum_i \Big[-\sum_j A_{ij} S_{ij} + \tfrac{1}{\beta}\sum_j A_{ij}\log A_{ij}\Big],
\qquad \Phi(X) = F(A^*;X) = -\tfrac{1}{\beta}\sum_i \log\sum_j e^{\beta S_{ij}}.$$
Gap: $F - \Phi = \tfrac{1}{\beta}\sum_i \mathrm{KL}(A_i\,\|\,A^*_i)$.</p>
"""

_FLOW = r"""
<p><b>Fisher–Rao attention flow</b> (§2–§3), costs $C = \partial E/\partial A$:
$$\dot A_{ij} = -\gamma A_{ij}\,(C_{ij} - \bar C_i), \qquad
D = \gamma \sum_i \mathrm{Var}_{A_i}(C_i) \ge 0,$$
in logits $\dot Z = \gamma \hat S - \lambda Z$ with $\lambda = \gamma/\beta$:
memory time $\beta/\gamma$.</p>
"""

EQUATIONS = {
    "attention": _COMMON + _FLOW + r"""
<p><b>Prescribed path</b> $X(t)$ (§6). Energy balance (§5):
$$\frac{d}{dt}F(A(t);X(t)) = -\langle A, \dot S\rangle - D.$$
Tracking bound (§4): $\mathrm{osc}(W_i) \le B_i$,
$\dot B_i = -\lambda B_i + \beta\,\mathrm{osc}(\dot S_i)$,
so $\sum_i \mathrm{KL}(A_i\|A^*_i) \le \sum_i B_i^2/8$.
<br><i>Look for:</i> at fixed features KL decays like $e^{-2\lambda t}$;
moving features leave a lag.</p>
""",
    "canonical": _COMMON + _FLOW + r"""
<p><b>Canonical model</b> (§7a): $H = \frac{\|P\|^2}{2m} + F(A;X) + \frac{k}{2}\|X\|^2$,
$$\dot X = P/m, \quad \dot P = A X M^\top + A^\top X M - kX, \quad C^H = C.$$
Energy–dissipation law: $\dfrac{dH}{dt} = -D \le 0$, i.e. $H(t) - H(0) + \int_0^t D\,ds = 0$.
<br><i>Look for:</i> H only decreases, the residual stays near 0;
large γ approaches the reduced model.</p>
""",
    "value_matching": _COMMON + _FLOW + r"""
<p><b>Value matching</b> (§7b): $O = A X W_V^\top$, $R = X - O$,
$H = \frac{\|P\|^2}{2m} + F(A;X) + \frac{\kappa}{2}\|R\|^2 + \frac{k}{2}\|X\|^2$,
$$\dot X = P/m,\quad \dot P = f(A,X) - \kappa\,(R - A^\top R W_V) - kX,\quad
C^H = C - \kappa R W_V X^\top.$$
The attention target is $\mathrm{rowsoftmax}(\beta\hat S)$, $\hat S = S + \kappa R W_V X^\top$
(the tracking bound is n/a). Law: $dH/dt = -D \le 0$.</p>
""",
    "cotangent_lift": _COMMON + _FLOW + r"""
<p><b>Cotangent lift</b> (§7c): $H = \langle P, A X W_V^\top\rangle + F(A;X)$,
$$\dot X = A X W_V^\top,\quad \dot P = -A^\top P W_V + f(A,X),\quad C^H = C + P W_V X^\top.$$
The feature velocity <i>is</i> the attention output. Law: $dH/dt = -D \le 0$
(the tracking bound is n/a: the target is $\mathrm{rowsoftmax}(\beta\hat S)$,
$\hat S = S - P W_V X^\top$).</p>
""",
    "reduced": _COMMON + r"""
<p><b>Reduced (softmax-slaved) Hamiltonian</b> (§8): $A \equiv A^*(X)$,
$$H_r = \frac{\|P\|^2}{2m} + \Phi(X) + \frac{k}{2}\|X\|^2,\qquad \dot X = P/m,\quad
\dot P = f(A^*(X), X) - kX.$$
Conservative: $H_r$ is conserved (no dissipation, KL $\equiv 0$). It is the $\gamma\to\infty$
limit of the canonical model.</p>
""",
    "transformer": _COMMON + r"""
<p><b>First-order Transformer flow</b> (§8): $$\dot X = A^*(X)\,X\,W_V^\top,$$
whose explicit-Euler step $X_{l+1} = X_l + h\,A^*(X_l) X_l W_V^\top$ is one residual attention
layer. The energy shown is $\Phi$; the energy residual is n/a.</p>
""",
}


class Explanation(pn.viewable.Viewer):
    """The equations of ``settings.model``."""

    settings = param.ClassSelector(class_=Settings, doc="The settings whose model is shown.")

    def __init__(self, stylesheets=(), **params):
        super().__init__(**params)
        self.pane = pn.pane.LaTeX(self._text(), renderer="katex", sizing_mode="stretch_width",
                                  css_classes=["explain"], stylesheets=list(stylesheets))

    def _text(self) -> str:
        return f"<h3>Model: {self.settings.model}</h3>" + EQUATIONS[self.settings.model]

    @param.depends("settings.model", watch=True)
    def _update(self):
        self.pane.object = self._text()

    def __panel__(self):
        return self.pane
