//! Tests of the GitHub client: retry backoff, rate-limit headers, error copies.

use super::*;

#[test]
fn backoff_grows_and_is_capped() {
    let policy = RetryPolicy { max_retries: 10, base: Duration::from_millis(100), cap: Duration::from_secs(1) };
    for _ in 0..50 {
        let first = policy.delay(0);
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100), "{first:?}");
        let third = policy.delay(2);
        assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400), "{third:?}");
        let late = policy.delay(30);
        assert!(late >= Duration::from_millis(500) && late <= Duration::from_secs(1), "{late:?}");
    }
}

#[test]
fn rate_limit_answers() {
    let mut headers = HeaderMap::new();
    let reset = Timestamp::now().as_second() + 120;
    headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
    headers.insert("x-ratelimit-reset", HeaderValue::from_str(&reset.to_string()).unwrap());
    let until = rate_limited_until(StatusCode::FORBIDDEN, &headers).unwrap();
    assert_eq!(until.as_second(), reset);
    // A plain 403 (no permission) is not a rate limit, nor a 200 with remaining 0.
    assert_eq!(rate_limited_until(StatusCode::FORBIDDEN, &HeaderMap::new()), None);
    assert_eq!(rate_limited_until(StatusCode::OK, &headers), None);
    let mut retry = HeaderMap::new();
    retry.insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
    let until = rate_limited_until(StatusCode::TOO_MANY_REQUESTS, &retry).unwrap();
    let wait = until.duration_since(Timestamp::now()).as_secs();
    assert!((28..=30).contains(&wait), "{wait}");
    retry.insert(header::RETRY_AFTER, HeaderValue::from_static("Wed, 21 Oct 2037 07:28:00 GMT"));
    let until = rate_limited_until(StatusCode::FORBIDDEN, &retry).unwrap();
    assert_eq!(until.to_string(), "2037-10-21T07:28:00Z");
}

#[test]
fn bad_settings_are_rejected_without_leaking_the_token() {
    let config = GitHubConfig { api_url: "ftp://example".into(), ..Default::default() };
    assert!(GitHubClient::new(config).is_err());
    let config = GitHubConfig { token: Some(Token::new("sec\nret-value")), ..Default::default() };
    // `Token::new` trims, so put the bad byte inside.
    let err = GitHubClient::new(config).unwrap_err().to_string();
    assert!(!err.contains("ret-value"), "{err}");
}

#[test]
fn names_are_checked() {
    crate::install_crypto_provider();
    let client = GitHubClient::new(GitHubConfig::default()).unwrap();
    assert!(client.repository("SovereignCloudStack", "cluster-stacks").check_names().is_ok());
    assert!(client.repository("..", "x").check_names().is_err());
    assert!(client.repository("a/b", "x").check_names().is_err());
    assert!(client.repository("a", "x?y=1").check_names().is_err());
}
