//! Sprig's randomness, hashing and symmetric crypto (crypto.go, goutils'
//! random strings): `randAlphaNum` & co., `uuidv4`, `randBytes`, `bcrypt`,
//! `htpasswd`, `derivePassword`, `encryptAES`/`decryptAES`.
//! Randomness comes from the host (seedable in tests).

use crate::env::HostExt as _;
use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use base64::Engine as _;
use hmac::Mac as _;

use super::{i, reg, s};
use gotmpl::func::{FuncMap, Host, Param};
use gotmpl::value::FuncError;

use Param::{Int, String as Str};

fn random_from(h: &mut dyn Host, count: i64, chars: &[u8]) -> Result<String, FuncError> {
    use rand::Rng;
    if count < 0 {
        return Err(FuncError::msg(format!("Requested random string length {count} is less than 0.")));
    }
    gotmpl::room(h, "random string", count as u128 * 8)?;
    let mut rng = h.rng();
    Ok((0..count).map(|_| char::from(chars[rng.random_range(0..chars.len())])).collect())
}

/// What a bcrypt hash (cost 10) or a scrypt derivation costs in steps: about
/// what the executor does in the same CPU time (~70 ms), so the step
/// limit bounds a render's CPU whatever it calls.
const BCRYPT_FUEL: u64 = 2_000_000;

const ALPHA: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const NUM: &[u8] = b"0123456789";

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "randAlphaNum", &[Int], |h, a| Ok(random_from(h, i(&a[0]), ALNUM)?.into()));
    reg(m, "randAlpha", &[Int], |h, a| Ok(random_from(h, i(&a[0]), ALPHA)?.into()));
    reg(m, "randNumeric", &[Int], |h, a| Ok(random_from(h, i(&a[0]), NUM)?.into()));
    reg(m, "randAscii", &[Int], |h, a| {
        let printable: Vec<u8> = (32u8..=126).collect();
        Ok(random_from(h, i(&a[0]), &printable)?.into())
    });
    reg(m, "randBytes", &[Int], |h, a| {
        let n = i(&a[0]);
        if n < 0 {
            return Err(FuncError::msg("runtime error: makeslice: len out of range"));
        }
        gotmpl::room(h, "randBytes", n as u128 * 2)?;
        let mut buf = vec![0u8; n as usize];
        h.rng().fill_bytes(&mut buf);
        Ok(base64::engine::general_purpose::STANDARD.encode(buf).into())
    });
    reg(m, "uuidv4", &[], |h, _| Ok(uuidv4(h).into()));
    reg(m, "bcrypt", &[Str], |h, a| {
        h.charge(BCRYPT_FUEL)?;
        Ok(bcrypt(h, &s(&a[0])).into())
    });
    // Sprig v3.3.0 (Helm's): bcrypt only, two parameters
    reg(m, "htpasswd", &[Str, Str], |h, a| {
        let (user, pass) = (s(&a[0]), s(&a[1]));
        if user.contains(':') {
            return Ok(format!("invalid username: {user}").into());
        }
        h.charge(BCRYPT_FUEL)?;
        Ok(format!("{user}:{}", bcrypt(h, &pass)).into())
    });
    reg(m, "derivePassword", &[Int, Str, Str, Str, Str], |h, a| {
        h.charge(BCRYPT_FUEL)?;
        Ok(derive_password(i(&a[0]) as u32, &s(&a[1]), &s(&a[2]), &s(&a[3]), &s(&a[4])).into())
    });
    reg(m, "encryptAES", &[Str, Str], |h, a| Ok(encrypt_aes(h, &s(&a[0]), &s(&a[1]))?.into()));
    reg(m, "decryptAES", &[Str, Str], |_, a| Ok(decrypt_aes(&s(&a[0]), &s(&a[1]))?.into()));
}

fn uuidv4(h: &mut dyn Host) -> String {
    let mut b = [0u8; 16];
    h.rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let x = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &x[..8], &x[8..12], &x[12..16], &x[16..20], &x[20..])
}

fn bcrypt(h: &mut dyn Host, pass: &str) -> String {
    let mut salt = [0u8; 16];
    h.rng().fill_bytes(&mut salt);
    match bcrypt::hash_with_salt(pass.as_bytes(), 10, salt) {
        Ok(parts) => parts.format_for_version(bcrypt::Version::TwoA),
        Err(e) => format!("failed to encrypt string with bcrypt: {e}"),
    }
}

const TEMPLATES: &[(&str, &[&str])] = &[
    ("maximum", &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"]),
    (
        "long",
        &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
    ),
    ("medium", &["CvcnoCvc", "CvcCvcno"]),
    ("short", &["Cvcn"]),
    ("basic", &["aaanaaan", "aannaaan", "aaannaaa"]),
    ("pin", &["nnnn"]),
];

fn template_chars(c: u8) -> &'static [u8] {
    match c {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

/// The Master Password algorithm as Sprig implements it.
fn derive_password(counter: u32, kind: &str, password: &str, user: &str, site: &str) -> String {
    let Some((_, templates)) = TEMPLATES.iter().find(|(k, _)| *k == kind) else {
        return format!("cannot find password template {kind}");
    };
    const SEED: &[u8] = b"com.lyndir.masterpassword";
    let mut salt = SEED.to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0u8; 64];
    let params = match scrypt::Params::new(15, 8, 2) {
        Ok(p) => p,
        Err(e) => return format!("failed to derive password: {e}"),
    };
    if let Err(e) = scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key) {
        return format!("failed to derive password: {e}");
    }
    let mut msg = SEED.to_vec();
    msg.extend_from_slice(&(site.len() as u32).to_be_bytes());
    msg.extend_from_slice(site.as_bytes());
    msg.extend_from_slice(&counter.to_be_bytes());
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return "failed to derive password".into();
    };
    mac.update(&msg);
    let seed = mac.finalize().into_bytes();
    let temp = templates[usize::from(seed[0]) % templates.len()].as_bytes();
    temp.iter()
        .enumerate()
        .map(|(i, c)| {
            let chars = template_chars(*c);
            char::from(chars[usize::from(seed[i + 1]) % chars.len()])
        })
        .collect()
}

fn aes_key(password: &str) -> Result<aes::Aes256, FuncError> {
    let mut key = [0u8; 32];
    let p = password.as_bytes();
    let n = p.len().min(32);
    key[..n].copy_from_slice(&p[..n]);
    aes::Aes256::new_from_slice(&key).map_err(|e| FuncError::msg(e.to_string()))
}

fn encrypt_aes(h: &mut dyn Host, password: &str, plaintext: &str) -> Result<String, FuncError> {
    if plaintext.is_empty() {
        return Ok(String::new());
    }
    let cipher = aes_key(password)?;
    let mut content = plaintext.as_bytes().to_vec();
    let pad = 16 - content.len() % 16;
    content.extend(std::iter::repeat_n(pad as u8, pad));
    let mut iv = [0u8; 16];
    h.rng().fill_bytes(&mut iv);
    let mut out = iv.to_vec();
    let mut prev = iv;
    for chunk in content.chunks(16) {
        let mut block = [0u8; 16];
        for (j, b) in block.iter_mut().enumerate() {
            *b = chunk[j] ^ prev[j];
        }
        let mut blk = aes::Block::from(block);
        cipher.encrypt_block(&mut blk);
        prev.copy_from_slice(&blk);
        out.extend_from_slice(&blk);
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}

fn decrypt_aes(password: &str, crypt64: &str) -> Result<String, FuncError> {
    if crypt64.is_empty() {
        return Ok(String::new());
    }
    let data = super::encoding::b64_decode(crypt64).map_err(FuncError::msg)?;
    let cipher = aes_key(password)?;
    if data.len() < 16 {
        return Err(FuncError::msg(format!(
            "runtime error: slice bounds out of range [:16] with capacity {}",
            data.len()
        )));
    }
    let (iv, body) = data.split_at(16);
    if body.len() % 16 != 0 {
        return Err(FuncError::msg("crypto/cipher: input not full blocks"));
    }
    let mut prev = [0u8; 16];
    prev.copy_from_slice(iv);
    let mut out = Vec::with_capacity(body.len());
    for chunk in body.chunks(16) {
        let mut block = [0u8; 16];
        block.copy_from_slice(chunk);
        let mut blk = aes::Block::from(block);
        cipher.decrypt_block(&mut blk);
        for j in 0..16 {
            out.push(blk[j] ^ prev[j]);
        }
        prev.copy_from_slice(chunk);
    }
    let pad = out.last().copied().map(usize::from).unwrap_or(0);
    if pad > out.len() {
        return Err(FuncError::msg(format!(
            "runtime error: slice bounds out of range [:{}]",
            out.len() as i64 - pad as i64
        )));
    }
    out.truncate(out.len() - pad);
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn random_strings_and_uuids() {
        let r = callv("randAlphaNum", &[Value::Int(12)]);
        assert_eq!(r.len(), 12);
        assert!(r.chars().all(|c| c.is_ascii_alphanumeric()));
        assert!(callv("randNumeric", &[Value::Int(5)]).chars().all(|c| c.is_ascii_digit()));
        assert!(callv("randAlpha", &[Value::Int(5)]).chars().all(|c| c.is_ascii_alphabetic()));
        let u = callv("uuidv4", &[]);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_eq!(callv("randBytes", &[Value::Int(3)]).len(), 4);
    }

    #[test]
    fn hashes_and_ciphers() {
        let h = callv("htpasswd", &[st("user"), st("pass")]);
        assert!(h.starts_with("user:$2a$10$"), "{h}");
        assert_eq!(h.len(), "user:".len() + 60);
        assert_eq!(callv("htpasswd", &[st("a:b"), st("pass")]), "invalid username: a:b");
        let enc = callv("encryptAES", &[st("secretkey"), st("plaintext")]);
        assert_eq!(callv("decryptAES", &[st("secretkey"), st(&enc)]), "plaintext");
        assert_eq!(callv("encryptAES", &[st("k"), st("")]), "");
    }

    #[test]
    fn derive_password_matches_master_password() {
        // Sprig's own test vector
        assert_eq!(
            callv("derivePassword", &[Value::Int(1), st("long"), st("password"), st("user"), st("example.com")]),
            "ZedaFaxcZaso9*"
        );
    }
}
