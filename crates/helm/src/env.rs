//! Helm's state for one render, kept where the engine keeps a caller's state
//! ([`gotmpl::Host::state`]): the random source and clock of the Sprig
//! functions, and the nesting count of `include`.
//!
//! Go's Sprig reads `crypto/rand` and `time.Now()` directly; a render that
//! passes a [`RenderEnv`] gets the same, fixed once per render (and seeded in
//! tests). Without one (the engine executed with another state) the
//! functions fall back to exactly what Go does: the OS's randomness and the
//! current time.

use std::collections::HashMap;

use gotmpl::Host;
use rand::SeedableRng as _;

/// The per-render state of Helm's function library.
pub struct RenderEnv {
    seed: Option<u64>,
    rng: Option<rand::rngs::StdRng>,
    /// Read when first asked for: finding the local time zone walks the system's zone database,
    /// a tenth of a small chart's render, and most charts never ask.
    now: Option<jiff::Zoned>,
    /// Nesting count per name of `include` (Helm stops at 1000).
    pub(crate) includes: HashMap<String, usize>,
    /// The Sprig regex functions' compiled patterns (see `sprig::regex`).
    pub(crate) regexes: HashMap<String, regex::Regex>,
}

impl RenderEnv {
    /// A render's state: `seed` fixes the random functions (tests; `None`: the OS's entropy),
    /// `now` is what `now`, `date` and certificate validity see.
    pub fn new(seed: Option<u64>, now: jiff::Zoned) -> Self {
        Self { seed, rng: None, now: Some(now), includes: HashMap::new(), regexes: HashMap::new() }
    }

    /// A render's state whose "now" is the clock's at the first function that asks for it
    /// (then fixed for the rest of the render).
    pub fn seeded(seed: Option<u64>) -> Self {
        Self { seed, rng: None, now: None, includes: HashMap::new(), regexes: HashMap::new() }
    }

    /// Whether the render drew on randomness (a random string, a generated key or certificate):
    /// its output then differs from one render to the next.
    pub fn drew_randomness(&self) -> bool {
        self.rng.is_some()
    }

    fn rng(&mut self) -> &mut rand::rngs::StdRng {
        let seed = self.seed;
        // Drawn lazily: most renders call no random function.
        self.rng.get_or_insert_with(|| match seed {
            Some(s) => rand::rngs::StdRng::seed_from_u64(s),
            None => rand::rngs::StdRng::from_os_rng(),
        })
    }
}

impl Default for RenderEnv {
    fn default() -> Self {
        Self::seeded(None)
    }
}

/// What Helm's functions ask of the host beyond the engine's own calls.
pub(crate) trait HostExt {
    /// The render's random source (the OS's without a [`RenderEnv`]).
    fn rng(&mut self) -> Box<dyn rand::RngCore + '_>;
    /// The render's "now" (the current time without a [`RenderEnv`]).
    fn now(&mut self) -> jiff::Zoned;
    /// The render's state, when the caller gave one.
    fn env(&mut self) -> Option<&mut RenderEnv>;
}

impl HostExt for dyn Host + '_ {
    fn rng(&mut self) -> Box<dyn rand::RngCore + '_> {
        match self.env() {
            Some(env) => Box::new(env.rng()),
            None => Box::new(rand::rng()),
        }
    }

    fn now(&mut self) -> jiff::Zoned {
        match self.env() {
            Some(env) => env.now.get_or_insert_with(jiff::Zoned::now).clone(),
            None => jiff::Zoned::now(),
        }
    }

    fn env(&mut self) -> Option<&mut RenderEnv> {
        self.state().downcast_mut::<RenderEnv>()
    }
}
