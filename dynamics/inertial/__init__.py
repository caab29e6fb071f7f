"""Part II: inertial (momentum) attention (Theory page, Part II: inertial attention lab).

Pure NumPy/SciPy: the readable physics of the first-order, accelerated and softmax models
(velocities, forces, energies), the closed moment systems, blow-up detection, attention
layers and whitened token clouds, and the base case, momentum on a quadratic, with its
closed forms (:mod:`dynamics.inertial.quadratic`). The streaming models are registered in
:mod:`dynamics.models` (``momentum_quadratic``, ``linear``, ``linear_accelerated``,
``softmax_first_order``, ``softmax_inertial``, ``softmax_momentum``) and run by
:class:`dynamics.Simulation`.
"""

from .accelerated import (
                          accelerated_blowup_time,
                          accelerated_dissipation,
                          accelerated_force,
                          accelerated_hamiltonian,
                          accelerated_kinetic,
                          accelerated_trajectory,
                          accelerated_velocity,
                          matrix_dissipation,
                          matrix_field,
                          matrix_hamiltonian,
                          undamped_blowup_time,
)
from .blowup import BlowupResult, fixed_step_blowup, integrate_until_blowup
from .clouds import CLOUDS, initial_cloud, raw_cloud, second_moment, whiten
from .damping import NO_DAMPING, Damping
from .layers import LayerCrossing, LayerRun, directional_moment, layer_crossing, run_layers
from .linear import (
                          MomentTrajectory,
                          closed_form_moments,
                          crossing_time_closed_form,
                          first_order_blowup_numeric,
                          first_order_blowup_time,
                          linear_velocity,
                          moment_field,
                          moment_trajectory,
)
from .matrices import model_matrices, parse_diagonal, value_kernel_ratio
from .softmax import (
                          inertial_dissipation,
                          inertial_force,
                          inertial_hamiltonian,
                          inertial_kinetic,
                          inertial_velocity,
                          log_partition,
                          softmax_kernel,
                          softmax_velocity,
)

__all__ = [
    "BlowupResult", "CLOUDS", "Damping", "LayerCrossing", "LayerRun",
    "MomentTrajectory", "NO_DAMPING", "accelerated_blowup_time",
    "accelerated_dissipation", "accelerated_force", "accelerated_hamiltonian",
    "accelerated_kinetic", "accelerated_trajectory", "accelerated_velocity",
    "closed_form_moments", "crossing_time_closed_form", "directional_moment",
    "first_order_blowup_numeric", "first_order_blowup_time", "fixed_step_blowup",
    "inertial_dissipation", "inertial_force", "inertial_hamiltonian", "inertial_kinetic",
    "inertial_velocity", "initial_cloud", "integrate_until_blowup", "layer_crossing",
    "linear_velocity", "log_partition", "matrix_dissipation", "matrix_field",
    "matrix_hamiltonian", "model_matrices", "moment_field", "moment_trajectory",
    "parse_diagonal", "raw_cloud", "run_layers", "second_moment", "softmax_kernel",
    "softmax_velocity", "undamped_blowup_time", "value_kernel_ratio", "whiten",
]

