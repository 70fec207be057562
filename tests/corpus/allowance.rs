//! What a corpus run may miss of the forecast's targets, and the limit it is held to instead.

/// A target a run cannot meet, the floor (or, for counts of seconds, the ceiling) it is held to
/// instead, so that a regression still fails, and why.
pub struct Allowance {
    pub run: &'static str,
    /// A variant's name (`Variant::name`), or `None` for every variant.
    pub variant: Option<&'static str>,
    pub what: &'static str,
    pub limit: f64,
}

pub const fn allow(
    run: &'static str,
    variant: Option<&'static str>,
    what: &'static str,
    limit: f64,
) -> Allowance {
    Allowance {
        run,
        variant,
        what,
        limit,
    }
}
