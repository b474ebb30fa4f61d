//! RSA key generation for `genPrivateKey` and the certificate functions, as fast as Go's.
//!
//! A key is two random primes of half the modulus size with their top two bits set (so the
//! modulus has exactly the size asked for), `e = 65537`, and `d` from them, as Go's
//! `rsa.GenerateKey` makes it. Finding the primes is nearly all the cost (a 4096-bit key tests a
//! few hundred 2048-bit candidates), so the two searches run on two threads: they are
//! independent, and each has a generator of its own seeded from the render's, which keeps a
//! seeded render reproducible.
//!
//! A candidate is sieved by small primes (`crypto-primes`), then must pass a Miller–Rabin test to
//! base 2, where multiplying by the base is a modular doubling, so that each step costs one
//! Montgomery squaring (nearly every candidate fails here; the general exponentiation of
//! `crypto-primes` also multiplies). The one that passes then gets Miller–Rabin rounds with
//! random bases, as many as FIPS 186-5 (B.3) requires for an error below 2^-128 on a random
//! candidate: the test Go's key generation uses, at a third of the cost of a strong Lucas test.
//! The `rsa` crate derives `d`, validates and encodes the key.

use crypto_bigint::modular::{BoxedMontyForm, BoxedMontyParams};
use crypto_bigint::{MontyForm, MontyMultiplier as _, Odd};
use crypto_primes::Flavor;
use crypto_primes::hazmat::{MillerRabin, Primality, SetBits, SmallFactorsSieveFactory, minimum_mr_iterations};
use rand::{RngCore as _, SeedableRng as _};
use rsa::BoxedUint;

/// Go's public exponent.
const EXPONENT: u64 = 65537;

/// rand 0.9's generator as the rand_core 0.10 one `crypto-primes` takes. The ChaCha-based
/// `StdRng` is a cryptographically secure generator, which the marker trait asserts.
struct Rng(rand::rngs::StdRng);

impl rsa::rand_core::TryRng for Rng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.0.next_u32())
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.0.next_u64())
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.0.fill_bytes(dst);
        Ok(())
    }
}

impl rsa::rand_core::TryCryptoRng for Rng {}

/// Miller–Rabin rounds with random bases after the base-2 test, for `bits`-bit candidates: FIPS
/// 186-5's count for an error probability below 2^-128 (3 for 2048 bits, 6 for 1024).
fn random_rounds(bits: u32) -> usize {
    minimum_mr_iterations(bits, 128).unwrap_or(64)
}

/// A random prime of exactly `bits` bits whose two top bits are set.
fn prime(mut rng: Rng, bits: u32) -> Result<BoxedUint, String> {
    let sieve = SmallFactorsSieveFactory::new(Flavor::Any, bits, SetBits::TwoMsb).map_err(|e| e.to_string())?;
    let rounds = random_rounds(bits);
    crypto_primes::sieve_and_find(&mut rng, sieve, |rng, candidate: &BoxedUint| {
        let Some(odd) = Odd::new(candidate.clone()).into_option() else { return false };
        if !strong_probable_prime_base_2(&odd) {
            return false;
        }
        let test = MillerRabin::new(odd);
        (0..rounds).all(|_| test.test_random_base(rng) != Primality::Composite)
    })
    .map_err(|e| e.to_string())?
    .ok_or_else(|| format!("no {bits}-bit prime found"))
}

/// Miller–Rabin to base 2: with `n − 1 = d·2^s`, `2^d ≡ 1` or `2^(d·2^r) ≡ −1 (mod n)` for some
/// `r < s`. Square-and-multiply where "multiply by 2" is a modular doubling. Not constant-time:
/// the candidates it rejects are thrown away, and the one it accepts is kept whatever the path.
fn strong_probable_prime_base_2(n: &Odd<BoxedUint>) -> bool {
    let n_minus_1 = n.as_ref().wrapping_sub(BoxedUint::one());
    let s = n_minus_1.trailing_zeros();
    let Some(d) = n_minus_1.shr_vartime(s) else { return false };
    let params = BoxedMontyParams::new_vartime(n.clone());
    let one = BoxedMontyForm::one(&params);
    let minus_one = one.neg();
    let mut multiplier = <BoxedMontyForm as MontyForm>::Multiplier::from(&params);
    let mut x = one.clone();
    for bit in (0..d.bit_width_vartime()).rev() {
        multiplier.square_assign(&mut x);
        if d.bit_vartime(bit) {
            x = x.double();
        }
    }
    if x == one || x == minus_one {
        return true;
    }
    for _ in 1..s {
        multiplier.square_assign(&mut x);
        if x == minus_one {
            return true;
        }
        if x == one {
            // 1 reached without passing −1: a non-trivial square root of 1, so n is composite.
            return false;
        }
    }
    false
}

/// A `bits`-bit RSA key from `rng`'s randomness (two seeds are drawn from it).
pub(super) fn generate(rng: &mut dyn rand::RngCore, bits: usize) -> Result<rsa::PrivateKey, String> {
    if bits < 1024 || !bits.is_multiple_of(2) {
        return Err(format!("unsupported RSA key size {bits}"));
    }
    let half = u32::try_from(bits / 2).map_err(|e| e.to_string())?;
    let mut seeds = [[0u8; 32]; 2];
    for seed in &mut seeds {
        rng.fill_bytes(seed);
    }
    let seeded = |seed: [u8; 32]| Rng(rand::rngs::StdRng::from_seed(seed));
    let [p_seed, q_seed] = seeds;
    let (p, q) = std::thread::scope(|scope| {
        let other = std::thread::Builder::new().spawn_scoped(scope, || prime(seeded(q_seed), half));
        let p = prime(seeded(p_seed), half);
        let q = match other {
            Ok(handle) => handle.join().unwrap_or_else(|_| Err("prime search panicked".to_string())),
            // No second thread to be had (a sandbox's limit): the second prime is found here.
            Err(_) => prime(seeded(q_seed), half),
        };
        (p, q)
    });
    let (p, q) = (p?, q?);
    if p == q {
        // Two equal 2048-bit primes from independent seeds: only a broken generator does this.
        return Err("the random source repeated itself".to_string());
    }
    rsa::PrivateKey::from_p_q(p, q, BoxedUint::from(EXPONENT)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::traits::{PrivateKeyParts as _, PublicKeyParts as _};

    fn seeded(seed: u64) -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(seed)
    }

    #[test]
    fn a_key_has_the_size_asked_for_and_is_consistent() {
        for bits in [1024, 2048] {
            let key = generate(&mut seeded(7), bits).expect("key");
            assert_eq!(key.n().bit_width(), bits as u32, "modulus size");
            assert_eq!(key.e(), &BoxedUint::from(EXPONENT));
            let [p, q] = key.primes() else { panic!("two primes") };
            assert_eq!(p.bit_width(), bits as u32 / 2);
            assert_eq!(q.bit_width(), bits as u32 / 2);
            assert_ne!(p, q);
            // The rsa crate's own check: p·q = n, and d·e ≡ 1 modulo p−1 and q−1.
            key.validate().expect("a valid key");
        }
    }

    #[test]
    fn a_seeded_render_gets_the_same_key_and_other_seeds_other_keys() {
        let a = generate(&mut seeded(42), 1024).expect("key");
        let b = generate(&mut seeded(42), 1024).expect("key");
        let c = generate(&mut seeded(43), 1024).expect("key");
        assert_eq!(a.n(), b.n());
        assert_ne!(a.n(), c.n());
    }

    /// The base-2 test against the general Miller–Rabin of `crypto-primes` on every odd number
    /// in a range holding primes, composites and base-2 strong pseudoprimes (2047, 3277, 4033,
    /// 4681, 8321), and on random 1024-bit odd numbers.
    #[test]
    fn the_base_2_test_agrees_with_the_general_one() {
        let check = |n: BoxedUint| {
            let odd = Odd::new(n.clone()).expect("odd");
            let general = MillerRabin::new(odd.clone()).test_base_two() != Primality::Composite;
            assert_eq!(strong_probable_prime_base_2(&odd), general, "{n}");
            general
        };
        let passed = (5u64..10_000).step_by(2).filter(|n| check(BoxedUint::from(*n))).count();
        // 1,227 odd primes below 10,000 and the 5 strong pseudoprimes to base 2.
        assert_eq!(passed, 1_227 + 5);
        let mut rng = seeded(3);
        for _ in 0..64 {
            let mut bytes = [0u8; 128];
            rng.fill_bytes(&mut bytes);
            bytes[127] |= 1;
            check(BoxedUint::from_be_slice(&bytes, 1024).expect("1024 bits"));
        }
    }

    #[test]
    fn random_rounds_follow_fips_186_5() {
        assert_eq!(random_rounds(2048), 3);
        assert_eq!(random_rounds(1024), 6);
    }

    #[test]
    fn sizes_below_1024_bits_or_odd_are_refused() {
        for bits in [0, 512, 1023, 2049] {
            assert!(generate(&mut seeded(1), bits).is_err(), "{bits} bits");
        }
    }
}
