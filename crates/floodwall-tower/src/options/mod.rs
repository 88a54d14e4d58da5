//! The layers' options, each a small value of its own, said one way and shared by both
//! layers where both need it: what a refusal looks like ([`Refusals`]), waiting for the
//! next slot (`Wait`, feature `wait`), and which policies are enforced ([`Modes`]).

mod modes;
mod refusals;
#[cfg(feature = "wait")]
mod wait;

pub use modes::Modes;
pub use refusals::Refusals;
#[cfg(feature = "wait")]
pub use wait::Wait;
