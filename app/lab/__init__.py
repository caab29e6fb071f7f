"""The inertial lab tab (Part II): momentum on a quadratic, finite-time blow-up, clouds
and effective depth, each figure drawn from a preset's experiment."""
