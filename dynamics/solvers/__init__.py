"""Solvers that choose their own step (``simulate(rtol=...)``): DOP853 on the fused field
where the relaxation is not stiff (:mod:`.explicit`), an exponential Runge–Kutta method of
stiff order 4 where it is (:mod:`.exprk`), the model's own step composed or doubled for
every other model (:mod:`.adaptive`), and the tracking bound of their steps by quadrature
(:mod:`.tracking_bound`)."""
