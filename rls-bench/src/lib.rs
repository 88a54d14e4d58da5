//! Nothing here: the bench is benches/limitador.rs (a package needs a target of its own).
