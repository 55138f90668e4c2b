//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677, Kafka's `ScramSaslServer`): the
//! server side of the two-round exchange, over credentials that hold only the salt, the
//! iteration count and the derived stored and server keys (never the password).
//!
//! Every refusal is a [`ScramError`]; the client is told only Kafka's generic "invalid
//! credentials" message (as Kafka does, so an attacker cannot tell an unknown user from a
//! wrong password), the broker's log says which check failed.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2};
use subtle::ConstantTimeEq;

/// The SCRAM hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramMechanism {
    /// The mechanism's SASL name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's wire code in the user SCRAM credential APIs (1 and 2).
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of wire code `code`.
    #[must_use]
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// The mechanism named `name` (upper case, as in `sasl.enabled.mechanisms`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Kafka's bounds on the iteration count (`ScramMechanism.minIterations`, and the
    /// 16384 the controller accepts at most).
    pub const MIN_ITERATIONS: i32 = 4096;
    /// See [`Self::MIN_ITERATIONS`].
    pub const MAX_ITERATIONS: i32 = 16384;

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2_algorithm(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    pub(crate) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac_algorithm(), key);
        hmac::sign(&key, data).as_ref().to_vec()
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_algorithm(), data)
            .as_ref()
            .to_vec()
    }

    /// The salted password (`Hi(password, salt, i)`), as a client sends it to
    /// AlterUserScramCredentials.
    #[must_use]
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.digest_algorithm().output_len()];
        let rounds = std::num::NonZeroU32::new(iterations.max(1)).expect("at least one round");
        pbkdf2::derive(self.pbkdf2_algorithm(), rounds, salt, password, &mut out);
        out
    }

    /// The credential kept for a salted password (what Kafka's controller derives from an
    /// AlterUserScramCredentials upsertion).
    #[must_use]
    pub fn credential(
        self,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = self.hmac(salted_password, b"Client Key");
        ScramCredential {
            mechanism: self,
            stored_key: self.hash(&client_key),
            server_key: self.hmac(salted_password, b"Server Key"),
            salt,
            iterations,
        }
    }
}

/// One `--add-scram` user (Kafka's `kafka-storage format --add-scram` syntax).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddScram {
    /// The hash.
    pub mechanism: ScramMechanism,
    /// The user.
    pub name: String,
    /// The password.
    pub password: String,
    /// The PBKDF2 iteration count (4096 unless given).
    pub iterations: i32,
}

impl AddScram {
    /// Parses `SCRAM-SHA-256=[name=alice,password=alice-secret]` (also `iterations=N`;
    /// values may be double-quoted).
    ///
    /// # Errors
    /// A message saying what is missing or not allowed.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("--add-scram {text}: {why}");
        let (mechanism, rest) = text
            .split_once('=')
            .ok_or_else(|| bad("expected MECHANISM=[…]"))?;
        let mechanism = ScramMechanism::from_name(mechanism.trim())
            .ok_or_else(|| bad("the mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512"))?;
        let inner = rest
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| bad("expected [name=…,password=…]"))?;
        let (mut name, mut password, mut iterations) = (None, None, ScramMechanism::MIN_ITERATIONS);
        for field in inner.split(',') {
            let (key, value) = field
                .split_once('=')
                .ok_or_else(|| bad("expected key=value"))?;
            let value = value.trim().trim_matches('"').to_string();
            match key.trim() {
                "name" => name = Some(value),
                "password" => password = Some(value),
                "iterations" => {
                    iterations = value
                        .parse()
                        .ok()
                        .filter(|i| {
                            (ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS)
                                .contains(i)
                        })
                        .ok_or_else(|| bad("iterations must be 4096..16384"))?;
                }
                other => {
                    return Err(bad(&format!(
                        "unknown key {other} (name, password, iterations)"
                    )))
                }
            }
        }
        let name = name
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad("name is missing"))?;
        let password = password
            .filter(|p| !p.is_empty())
            .ok_or_else(|| bad("password is missing"))?;
        Ok(AddScram {
            mechanism,
            name,
            password,
            iterations,
        })
    }

    /// The credential, with a fresh random salt; `None` if the system's random source
    /// fails.
    #[must_use]
    pub fn credential(&self) -> Option<ScramCredential> {
        use ring::rand::SecureRandom;
        let mut salt = vec![0u8; 16];
        ring::rand::SystemRandom::new().fill(&mut salt).ok()?;
        let iterations = u32::try_from(self.iterations).unwrap_or(4096);
        let salted = self
            .mechanism
            .salted_password(self.password.as_bytes(), &salt, iterations);
        Some(self.mechanism.credential(salt, &salted, self.iterations))
    }
}

/// What the broker keeps of one user's SCRAM password for one mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    /// The hash.
    pub mechanism: ScramMechanism,
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// The PBKDF2 iteration count.
    pub iterations: i32,
}

impl ScramCredential {
    /// The metadata record that keeps this credential for user `name`.
    #[must_use]
    pub fn into_record(self, name: String) -> logbook_metadata::UserScramCredentialRecord {
        logbook_metadata::UserScramCredentialRecord {
            name,
            mechanism: self.mechanism.code(),
            salt: self.salt,
            stored_key: self.stored_key,
            server_key: self.server_key,
            iterations: self.iterations,
        }
    }

    /// The credential a metadata record keeps; `None` for an unknown mechanism code.
    #[must_use]
    pub fn from_record(record: &logbook_metadata::UserScramCredentialRecord) -> Option<Self> {
        Some(ScramCredential {
            mechanism: ScramMechanism::from_code(record.mechanism)?,
            salt: record.salt.clone(),
            stored_key: record.stored_key.clone(),
            server_key: record.server_key.clone(),
            iterations: record.iterations,
        })
    }
}

/// Why an exchange was refused (for the log; the client sees Kafka's generic message).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScramError {
    /// The message does not follow RFC 5802.
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    /// No credential for this user and mechanism.
    #[error("unknown user {0}")]
    UnknownUser(String),
    /// A SCRAM extension Logbook does not serve (delegation tokens).
    #[error("unsupported SCRAM extension {0}")]
    UnsupportedExtension(String),
    /// The client's final nonce is not the one agreed.
    #[error("nonce mismatch")]
    NonceMismatch,
    /// The channel binding echoes another GS2 header.
    #[error("channel binding mismatch")]
    ChannelBinding,
    /// The proof does not match the stored key.
    #[error("invalid proof for user {0}")]
    InvalidProof(String),
}

/// The server's half of one SCRAM exchange.
#[derive(Debug)]
pub enum ScramServer {
    /// Waiting for the client-first message.
    First {
        /// The hash.
        mechanism: ScramMechanism,
    },
    /// Server-first sent; waiting for the client-final message.
    Final {
        /// The user, as decoded from `n=`.
        user: String,
        /// The user's credential.
        credential: ScramCredential,
        /// The GS2 header the client-final's channel binding must echo.
        gs2_header: String,
        /// Client nonce plus server nonce.
        nonce: String,
        /// `client-first-bare + "," + server-first`.
        auth_message_prefix: String,
    },
    /// Done (either way).
    Done,
}

/// What one client message leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this challenge and wait for the next message.
    Challenge(Vec<u8>),
    /// Authenticated as this user; send the final message.
    Authenticated {
        /// The user name (the principal's name).
        user: String,
        /// The server-final message (`v=…`).
        server_final: Vec<u8>,
    },
}

impl ScramServer {
    /// A new exchange for `mechanism`.
    #[must_use]
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer::First { mechanism }
    }

    /// Takes the client's next message. `lookup` finds a user's credential for the
    /// mechanism; `server_nonce` is fresh randomness (printable, no comma).
    ///
    /// # Errors
    /// The exchange is refused; it must not continue.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<ScramStep, ScramError> {
        let state = std::mem::replace(self, ScramServer::Done);
        let message =
            std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        match state {
            ScramServer::First { mechanism } => {
                let (next, challenge) = client_first(mechanism, message, lookup, server_nonce)?;
                *self = next;
                Ok(ScramStep::Challenge(challenge))
            }
            ScramServer::Final {
                user,
                credential,
                gs2_header,
                nonce,
                auth_message_prefix,
            } => {
                let (without_proof, proof) = message
                    .rsplit_once(",p=")
                    .ok_or(ScramError::Malformed("client-final without p="))?;
                let mut fields = without_proof.split(',');
                let binding = fields
                    .next()
                    .and_then(|f| f.strip_prefix("c="))
                    .ok_or(ScramError::Malformed("client-final without c="))?;
                let final_nonce = fields
                    .next()
                    .and_then(|f| f.strip_prefix("r="))
                    .ok_or(ScramError::Malformed("client-final without r="))?;
                if BASE64.decode(binding).ok().as_deref() != Some(gs2_header.as_bytes()) {
                    return Err(ScramError::ChannelBinding);
                }
                if final_nonce != nonce {
                    return Err(ScramError::NonceMismatch);
                }
                let proof = BASE64
                    .decode(proof)
                    .map_err(|_| ScramError::Malformed("proof is not base64"))?;
                let auth_message = format!("{auth_message_prefix},{without_proof}");
                let mechanism = credential.mechanism;
                let client_signature =
                    mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
                if proof.len() != client_signature.len() {
                    return Err(ScramError::InvalidProof(user));
                }
                let client_key: Vec<u8> = proof
                    .iter()
                    .zip(&client_signature)
                    .map(|(p, s)| p ^ s)
                    .collect();
                let computed = mechanism.hash(&client_key);
                if !bool::from(computed.ct_eq(&credential.stored_key)) {
                    return Err(ScramError::InvalidProof(user));
                }
                let server_signature =
                    mechanism.hmac(&credential.server_key, auth_message.as_bytes());
                Ok(ScramStep::Authenticated {
                    user,
                    server_final: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
                })
            }
            ScramServer::Done => Err(ScramError::Malformed("message after the exchange ended")),
        }
    }
}

/// Reads client-first (`gs2-header client-first-bare`) and answers server-first.
fn client_first(
    mechanism: ScramMechanism,
    message: &str,
    lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    server_nonce: &str,
) -> Result<(ScramServer, Vec<u8>), ScramError> {
    // gs2-header: "n," / "y," then an optional "a=authzid", then ",".
    let (flag, rest) = message
        .split_once(',')
        .ok_or(ScramError::Malformed("no GS2 header"))?;
    if flag != "n" && flag != "y" {
        // "p=…" asks for channel binding, which Kafka does not offer either.
        return Err(ScramError::Malformed("channel binding is not supported"));
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(ScramError::Malformed("no client-first-bare"))?;
    let gs2_header = format!("{flag},{authzid},");
    let mut fields = bare.split(',');
    let user = fields
        .next()
        .and_then(|f| f.strip_prefix("n="))
        .ok_or(ScramError::Malformed("client-first without n="))?;
    let user = sasl_name(user)?;
    let client_nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .ok_or(ScramError::Malformed("client-first without r="))?;
    if client_nonce.is_empty() {
        return Err(ScramError::Malformed("empty client nonce"));
    }
    // Kafka's ScramExtensions are only for delegation tokens, which are not served.
    if let Some(extension) = fields.next() {
        let name = extension.split_once('=').map_or(extension, |(n, _)| n);
        return Err(ScramError::UnsupportedExtension(name.to_string()));
    }
    if let Some(authzid) = authzid.strip_prefix("a=") {
        if sasl_name(authzid)? != user {
            return Err(ScramError::Malformed(
                "authorization id differs from the user",
            ));
        }
    } else if !authzid.is_empty() {
        return Err(ScramError::Malformed("bad authorization id"));
    }
    let credential =
        lookup(&user, mechanism).ok_or_else(|| ScramError::UnknownUser(user.clone()))?;
    let nonce = format!("{client_nonce}{server_nonce}");
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&credential.salt),
        credential.iterations
    );
    let next = ScramServer::Final {
        user,
        credential,
        gs2_header,
        nonce,
        auth_message_prefix: format!("{bare},{server_first}"),
    };
    Ok((next, server_first.into_bytes()))
}

/// A `saslname` decoded: `=2C` is `,`, `=3D` is `=`, any other `=` is malformed.
fn sasl_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest
            .get(at + 1..at + 3)
            .ok_or(ScramError::Malformed("bad saslname escape"))?;
        out.push(match code {
            "2C" => ',',
            "3D" => '=',
            _ => return Err(ScramError::Malformed("bad saslname escape")),
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7677's SCRAM-SHA-256 example: user "user", password "pencil", its nonces, salt and
    // 4096 iterations give exactly the RFC's server-first and server-final messages.
    #[test]
    fn rfc7677_example() {
        let m = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let credential = m.credential(salt, &salted, 4096);
        let lookup = move |user: &str, mech| {
            (user == "user" && mech == ScramMechanism::Sha256).then(|| credential.clone())
        };
        let mut server = ScramServer::new(m);
        let first = server
            .step(
                b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                &lookup,
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
            )
            .expect("client-first");
        assert_eq!(
            first,
            ScramStep::Challenge(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".to_vec()
            )
        );
        let done = server
            .step(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                &lookup,
                "unused",
            )
            .expect("client-final");
        assert_eq!(
            done,
            ScramStep::Authenticated {
                user: "user".to_string(),
                server_final: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
            }
        );
        // A wrong proof, an unknown user, a changed nonce and a token extension are refused.
        let mut server = ScramServer::new(m);
        server
            .step(b"n,,n=user,r=abc", &lookup, "xyz")
            .expect("first");
        assert_eq!(
            server.step(
                b"c=biws,r=abcxyz,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                &lookup,
                ""
            ),
            Err(ScramError::InvalidProof("user".to_string()))
        );
        let mut server = ScramServer::new(m);
        assert_eq!(
            server.step(b"n,,n=mallory,r=abc", &lookup, "xyz"),
            Err(ScramError::UnknownUser("mallory".to_string()))
        );
        let mut server = ScramServer::new(m);
        server
            .step(b"n,,n=user,r=abc", &lookup, "xyz")
            .expect("first");
        assert_eq!(
            server.step(b"c=biws,r=abcXYZ,p=AAAA", &lookup, ""),
            Err(ScramError::NonceMismatch)
        );
        let mut server = ScramServer::new(m);
        assert_eq!(
            server.step(b"n,,n=user,r=abc,tokenauth=true", &lookup, "xyz"),
            Err(ScramError::UnsupportedExtension("tokenauth".to_string()))
        );
        assert_eq!(sasl_name("a=2Cb=3Dc"), Ok("a,b=c".to_string()));
        let add = AddScram::parse("SCRAM-SHA-512=[name=admin,password=\"s3cret\",iterations=8192]")
            .expect("parses");
        assert_eq!(
            (
                add.mechanism,
                add.name.as_str(),
                add.password.as_str(),
                add.iterations
            ),
            (ScramMechanism::Sha512, "admin", "s3cret", 8192)
        );
        assert_eq!(
            AddScram::parse("SCRAM-SHA-256=[name=a,password=b]").map(|a| a.iterations),
            Ok(4096)
        );
        for bad in [
            "PLAIN=[name=a,password=b]",
            "SCRAM-SHA-256=[name=a]",
            "SCRAM-SHA-256=name=a,password=b",
            "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
        ] {
            assert!(AddScram::parse(bad).is_err(), "{bad}");
        }
        assert!(sasl_name("a=2").is_err());
    }
}
