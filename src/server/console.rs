//! The web console's static files, built into the binary: the management listener answers
//! `GET /console`, `/console/` and `/console/<file>` from here (no Node, bundler or file on disk
//! at run time). The files are plain HTML, CSS and ES modules under `assets/console/`; the page
//! loads without a credential and every API call it makes carries the admin bearer itself.
//!
//! [`HEADERS`] go on every answer from here: a Content-Security-Policy allowing only this
//! origin's own scripts, styles and API (no inline script, no framing), `nosniff`, and
//! `no-store` so an upgraded binary never serves a page mixing old and new modules.

/// Headers for every console answer (beside its content type and length).
pub(crate) const HEADERS: &[(&str, &str)] = &[
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    ("cache-control", "no-store"),
];

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// One file of `assets/console/`, under its own name.
macro_rules! console_file {
    ($name:literal, $content_type:expr) => {
        (
            $name,
            $content_type,
            include_bytes!(concat!("../../assets/console/", $name)) as &[u8],
        )
    };
}

/// Each file: its name under `/console/`, its content type, its bytes.
const FILES: &[(&str, &str, &[u8])] = &[
    console_file!("index.html", HTML),
    console_file!("style.css", CSS),
    console_file!("app.js", JS),
    console_file!("api.js", JS),
    console_file!("dom.js", JS),
    console_file!("limits.js", JS),
    console_file!("keys.js", JS),
    console_file!("tenants.js", JS),
    console_file!("decimal.js", JS),
    console_file!("chart.js", JS),
    console_file!("spend.js", JS),
    console_file!("models.js", JS),
];

/// The file at `path`, what follows `/console` in the request's path (`""` and `"/"` are the
/// page itself): its content type and bytes, or `None` for anything else (`/consolex` gives
/// `"x"`, which is not ours either).
pub(crate) fn asset(path: &str) -> Option<(&'static str, &'static [u8])> {
    let name = match path {
        "" | "/" => "index.html",
        _ => path.strip_prefix('/')?,
    };
    FILES
        .iter()
        .find(|(file, _, _)| *file == name)
        .map(|(_, content_type, body)| (*content_type, *body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(path: &str) -> String {
        let (_, body) = asset(path).unwrap_or_else(|| panic!("no asset {path}"));
        String::from_utf8(body.to_vec()).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn the_page_is_served_at_the_root_with_and_without_a_slash() {
        for path in ["", "/", "/index.html"] {
            let (content_type, body) = asset(path).expect("the page");
            assert_eq!(content_type, "text/html; charset=utf-8");
            assert!(std::str::from_utf8(body)
                .unwrap()
                .starts_with("<!doctype html>"));
        }
    }

    #[test]
    fn modules_and_the_stylesheet_have_their_content_types() {
        assert_eq!(
            asset("/app.js").unwrap().0,
            "text/javascript; charset=utf-8"
        );
        assert_eq!(asset("/style.css").unwrap().0, "text/css; charset=utf-8");
    }

    #[test]
    fn anything_else_is_not_found() {
        for path in [
            "x",
            "index.html",
            "//app.js",
            "/nope.js",
            "/../Cargo.toml",
            "/assets/console/app.js",
            "/app.js?v=1",
            "/APP.JS",
        ] {
            assert!(asset(path).is_none(), "{path} answered");
        }
    }

    /// What the page and each module load (`/console/x` in the page, `./x.js` in a module) is a
    /// file here: a module left out of `FILES` would fail only in a browser otherwise.
    #[test]
    fn every_file_the_page_loads_is_served() {
        let page = text("/");
        for reference in page.split("\"/console/").skip(1) {
            let name = &reference[..reference.find('"').unwrap()];
            assert!(
                asset(&format!("/{name}")).is_some(),
                "index.html loads {name}"
            );
        }
        for (file, content_type, _) in FILES.iter().filter(|f| f.1 == JS) {
            assert_eq!(*content_type, JS);
            for import in text(&format!("/{file}")).split("from \"./").skip(1) {
                let name = &import[..import.find('"').unwrap()];
                assert!(
                    asset(&format!("/{name}")).is_some(),
                    "{file} imports {name}"
                );
            }
        }
    }

    /// Every file of assets/console/ is built in: one added there and not here would be missing
    /// from the binary.
    #[test]
    fn every_file_of_the_folder_is_built_in() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/console");
        let mut on_disk: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        on_disk.sort();
        let mut built_in: Vec<String> = FILES.iter().map(|f| f.0.to_string()).collect();
        built_in.sort();
        assert_eq!(on_disk, built_in);
    }

    /// The policy in HEADERS forbids inline script and style: none may be written, and no
    /// module builds markup from strings (every text goes in as a text node).
    #[test]
    fn nothing_needs_what_the_policy_forbids() {
        let page = text("/");
        assert!(!page.contains("<script>") && !page.contains(" style="));
        assert!(!page.contains("onclick="));
        for (file, _, _) in FILES.iter().filter(|f| f.1 == JS) {
            let code = text(&format!("/{file}"));
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "eval(",
                "document.cookie",
            ] {
                assert!(!code.contains(banned), "{file} uses {banned}");
            }
        }
        let csp = HEADERS
            .iter()
            .find(|(name, _)| *name == "content-security-policy")
            .unwrap()
            .1;
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"));
        for (name, value) in HEADERS {
            assert!(
                http::HeaderName::from_bytes(name.as_bytes()).is_ok(),
                "{name}"
            );
            assert!(http::HeaderValue::from_str(value).is_ok(), "{value}");
        }
        assert!(HEADERS.contains(&("cache-control", "no-store")));
    }
}
