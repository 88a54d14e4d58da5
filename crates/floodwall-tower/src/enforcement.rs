//! What a policy's refusals do: enforced, only logged, or not checked at all.

/// Whether a policy's refusals are enforced. Set per policy, and changeable while the
/// service runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Enforcement {
    /// Checked and counted; a refusal refuses the request. The default.
    #[default]
    Enforce,
    /// Checked and counted as if enforced, but a refusal is only logged and counted
    /// (`shadow_refused`): the request goes through. For trying a limit on real traffic.
    Shadow,
    /// Not checked at all: no store call, no headers, no metrics.
    Off,
}
