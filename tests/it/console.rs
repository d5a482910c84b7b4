//! The web console's files on the management listener (issue 47, item 4): served without a
//! credential, with their content types and the console's security headers, and nothing else
//! under `/console` (the browser test, `tests/console/`, drives the page itself).

use crate::support::client;
use crate::support::postgres::{postgres_url, Schema};
use crate::tenants::{speech_provider, start, Setup};

#[test]
fn the_console_is_served_with_its_headers_and_nothing_else_is() {
    let fake = speech_provider();
    let schema = Schema::new(&postgres_url());
    let setup = Setup {
        db_url: postgres_url(),
        schema: schema.name.clone(),
        ..Setup::default()
    };
    let i = start(&fake, &setup);
    for path in ["/console", "/console/", "/console/index.html"] {
        let page = client::request(i.admin, "GET", path, &[], b"");
        assert_eq!(page.status, 200, "{path}: {}", page.text());
        assert_eq!(
            page.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        assert!(page.text().contains("/console/app.js"), "{path}");
        let csp = page.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(page.header("cache-control"), Some("no-store"));
        assert!(page.header("set-cookie").is_none());
    }
    let module = client::request(i.admin, "GET", "/console/app.js", &[], b"");
    assert_eq!(module.status, 200);
    assert_eq!(
        module.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(module.text().contains("/whoami"));
    let style = client::request(i.admin, "GET", "/console/style.css", &[], b"");
    assert_eq!(
        style.header("content-type"),
        Some("text/css; charset=utf-8")
    );
    // Not the console's: another file, a name that only starts like it, another method.
    for (method, path) in [
        ("GET", "/console/nope.js"),
        ("GET", "/consolex"),
        ("GET", "/console/../Cargo.toml"),
        ("POST", "/console/"),
    ] {
        let answer = client::request(i.admin, method, path, &[], b"");
        assert_eq!(answer.status, 404, "{method} {path}: {}", answer.text());
        assert_eq!(answer.json()["code"], "not_found", "{method} {path}");
    }
}
