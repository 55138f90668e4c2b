//! SASL/OAUTHBEARER (RFC 7628, KIP-255) with Kafka's default validator for development,
//! `OAuthBearerUnsecuredValidatorCallbackHandler`: the token is an unsecured JWT
//! (`{"alg":"none"}`, an empty signature) whose principal claim (`sub`) names the user and
//! whose `exp` must not have passed. Its JAAS options are Kafka's:
//! `unsecuredValidatorPrincipalClaimName`, `unsecuredValidatorScopeClaimName`,
//! `unsecuredValidatorRequiredScope`, `unsecuredValidatorAllowableClockSkewMs`.
//!
//! A refused token is answered as RFC 7628 says and Kafka does: a challenge carrying
//! `{"status":"invalid_token"}`, to which the client answers `%x01`, and only then the
//! failure, whose message is that JSON. Signed tokens checked against a JWKS endpoint:
//! [`jwks`].

pub mod jwks;

use std::collections::BTreeMap;

use base64::Engine;

/// The unsecured validator's options.
#[derive(Clone, Debug)]
pub struct UnsecuredValidator {
    principal_claim: String,
    scope_claim: String,
    required_scope: Vec<String>,
    clock_skew_ms: i64,
}

impl UnsecuredValidator {
    /// The validator configured by the JAAS options of the OAUTHBEARER login module.
    ///
    /// # Errors
    /// `unsecuredValidatorAllowableClockSkewMs` is not a non-negative number.
    pub fn new(options: &BTreeMap<String, String>) -> Result<Self, String> {
        let clock_skew_ms = match options.get("unsecuredValidatorAllowableClockSkewMs") {
            None => 0,
            Some(v) => v.parse::<i64>().ok().filter(|ms| *ms >= 0).ok_or_else(|| {
                format!(
                    "unsecuredValidatorAllowableClockSkewMs {v}: expected a non-negative number"
                )
            })?,
        };
        Ok(UnsecuredValidator {
            principal_claim: options
                .get("unsecuredValidatorPrincipalClaimName")
                .cloned()
                .unwrap_or_else(|| "sub".to_string()),
            scope_claim: options
                .get("unsecuredValidatorScopeClaimName")
                .cloned()
                .unwrap_or_else(|| "scope".to_string()),
            required_scope: options
                .get("unsecuredValidatorRequiredScope")
                .map(|s| {
                    s.split(',')
                        .map(|x| x.trim().to_string())
                        .filter(|x| !x.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            clock_skew_ms,
        })
    }

    /// The principal name and expiry (ms since the epoch) of a valid token; otherwise why
    /// not (for the log).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<(String, i64), String> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWS compact serialization (three dot-separated parts)".to_string());
        };
        if !signature.is_empty() {
            return Err("an unsecured JWS must have an empty signature".to_string());
        }
        let header = json_part(header, "header")?;
        if header.get("alg").and_then(serde_json::Value::as_str) != Some("none") {
            return Err(
                "the JWS header's alg must be \"none\" (signed tokens are not served yet)"
                    .to_string(),
            );
        }
        let claims = json_part(payload, "payload")?;
        let principal = claims
            .get(&self.principal_claim)
            .and_then(serde_json::Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| format!("no string principal claim {}", self.principal_claim))?;
        let exp_ms = seconds_claim(&claims, "exp")?.ok_or("no exp claim")?;
        if now_ms - self.clock_skew_ms >= exp_ms {
            return Err(format!(
                "the token expired at {exp_ms} ms (now {now_ms} ms)"
            ));
        }
        if let Some(iat_ms) = seconds_claim(&claims, "iat")? {
            if iat_ms > now_ms + self.clock_skew_ms {
                return Err(format!("the token was issued in the future ({iat_ms} ms)"));
            }
        }
        if !self.required_scope.is_empty() {
            let scope: Vec<&str> = match claims.get(&self.scope_claim) {
                Some(serde_json::Value::String(s)) => s.split(' ').collect(),
                Some(serde_json::Value::Array(a)) => {
                    a.iter().filter_map(serde_json::Value::as_str).collect()
                }
                _ => Vec::new(),
            };
            if let Some(missing) = self
                .required_scope
                .iter()
                .find(|s| !scope.contains(&s.as_str()))
            {
                return Err(format!("the token's scope lacks {missing}"));
            }
        }
        Ok((principal.to_string(), exp_ms))
    }
}

fn json_part(part: &str, what: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|e| format!("JWS {what} is not base64url: {e}"))?;
    match serde_json::from_slice(&bytes) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        _ => Err(format!("JWS {what} is not a JSON object")),
    }
}

/// A NumericDate claim (seconds, possibly fractional) in milliseconds.
fn seconds_claim(
    claims: &serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .map(|s| Some((s * 1000.0) as i64))
            .ok_or_else(|| format!("claim {name} is not a number")),
    }
}

/// The token of an OAUTHBEARER client-first message
/// (`gs2-header %x01 auth=Bearer <token> %x01 [key=value %x01]* %x01`) and its
/// authorization id (empty if none).
///
/// # Errors
/// The message is not one.
pub fn client_first(message: &[u8]) -> Result<(String, String), String> {
    let text = std::str::from_utf8(message).map_err(|_| "not UTF-8".to_string())?;
    let (gs2, rest) = text
        .split_once('\u{1}')
        .ok_or("no %x01 after the GS2 header")?;
    let mut gs2 = gs2.split(',');
    let (Some("n" | "y"), Some(authzid), Some(""), None) =
        (gs2.next(), gs2.next(), gs2.next(), gs2.next())
    else {
        return Err("bad GS2 header".to_string());
    };
    let authzid = match authzid.strip_prefix("a=") {
        Some(id) => id.to_string(),
        None if authzid.is_empty() => String::new(),
        None => return Err("bad authorization id".to_string()),
    };
    let body = rest
        .strip_suffix("\u{1}\u{1}")
        .or_else(|| rest.strip_suffix('\u{1}'))
        .ok_or("not ended by %x01%x01")?;
    let auth = body
        .split('\u{1}')
        .find_map(|kv| kv.strip_prefix("auth="))
        .ok_or("no auth key")?;
    let (scheme, token) = auth.split_once(' ').ok_or("auth is not 'Bearer <token>'")?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(format!("auth scheme {scheme} is not Bearer"));
    }
    let token = token.trim();
    if token.is_empty()
        || !token
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err("the token has characters a JWS cannot have".to_string());
    }
    Ok((token.to_string(), authzid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(header: &str, claims: &str) -> String {
        let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("{}.{}.", e.encode(header), e.encode(claims))
    }

    // A token as librdkafka makes it is valid until its exp; signed, expired, principal-less
    // or scope-less tokens are refused; the client-first message is read as RFC 7628 writes
    // it, with or without an authorization id.
    #[test]
    fn unsecured_tokens() {
        let v = UnsecuredValidator::new(&BTreeMap::new()).expect("defaults");
        let good = jwt(
            r#"{"alg":"none"}"#,
            r#"{"sub":"alice","iat":1000,"exp":2000.5,"scope":"a b"}"#,
        );
        assert_eq!(
            v.validate(&good, 1_500_000),
            Ok(("alice".to_string(), 2_000_500))
        );
        assert!(v.validate(&good, 2_000_500).is_err(), "expired");
        assert!(v
            .validate(&jwt(r#"{"alg":"RS256"}"#, r#"{"sub":"a","exp":9e9}"#), 0)
            .is_err());
        assert!(v
            .validate(&jwt(r#"{"alg":"none"}"#, r#"{"exp":9e9}"#), 0)
            .is_err());
        assert!(v
            .validate(&jwt(r#"{"alg":"none"}"#, r#"{"sub":"a"}"#), 0)
            .is_err());
        assert!(v.validate(&format!("{good}sig"), 1_500_000).is_err());
        let options: BTreeMap<String, String> = [(
            "unsecuredValidatorRequiredScope".to_string(),
            "b,c".to_string(),
        )]
        .into();
        let scoped = UnsecuredValidator::new(&options).expect("scope");
        assert!(scoped.validate(&good, 1_500_000).is_err(), "c is missing");
        let message = format!("n,,\u{1}auth=Bearer {good}\u{1}\u{1}");
        assert_eq!(
            client_first(message.as_bytes()),
            Ok((good.clone(), String::new()))
        );
        let message = format!("n,a=alice,\u{1}host=x\u{1}auth=bearer {good}\u{1}\u{1}");
        assert_eq!(
            client_first(message.as_bytes()),
            Ok((good, "alice".to_string()))
        );
        assert!(client_first(b"n,,\x01auth=Basic abc\x01\x01").is_err());
        assert!(client_first(b"garbage").is_err());
    }
}
