//! The API's documents on the admin listener (C11): `GET /openapi.json`,
//! the very bytes `items-service openapi` prints, and `GET /docs`, an
//! interactive page of it (Swagger UI, its files built into the binary: no
//! network at build or run time).
//!
//! Invariants:
//! - `/openapi.json` is
//!   [`openapi_json`](crate::http::openapi::openapi_json), computed once;
//! - the page's "Try it out" sends its requests to the public port, on the
//!   host the page was loaded from (the document names no server, and the
//!   admin port serves none of its routes); the public port answers them
//!   because CORS allows any origin (C8);
//! - only the admin listener serves these: the public port's routes stay
//!   exactly those of the spec (C11).

use std::sync::Arc;

use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use actix_web::web::Bytes;
use actix_web::{HttpResponse, web};
use utoipa_swagger_ui::Config;

/// What the admin listener needs to serve the documents.
#[derive(Debug, Clone)]
pub struct ApiDocs {
    /// The port of the public listener, where "Try it out" sends requests.
    public_port: u16,
}

impl ApiDocs {
    /// The documents of a service whose public listener is on `public_port`.
    pub fn for_public_port(public_port: u16) -> Self {
        Self { public_port }
    }
}

/// What the handlers share: the document, the page, Swagger UI's settings.
pub(crate) struct Served {
    /// Shared by every answer, never copied.
    openapi: Bytes,
    page: Bytes,
    config: Arc<Config<'static>>,
}

impl Served {
    pub(crate) fn new(docs: &ApiDocs) -> Self {
        Self {
            openapi: Bytes::from(crate::http::openapi::openapi_json()),
            page: Bytes::from(page(docs.public_port)),
            config: Arc::new(Config::from(OPENAPI_PATH)),
        }
    }
}

/// Where the document is served.
pub(crate) const OPENAPI_PATH: &str = "/openapi.json";

/// `GET /openapi.json`.
pub(crate) async fn openapi(served: web::Data<Served>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
        .body(served.openapi.clone())
}

/// `GET /docs`: the page.
pub(crate) async fn page_handler(served: web::Data<Served>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        ))
        .body(served.page.clone())
}

/// `GET /docs/{file}`: Swagger UI's scripts, styles and icons.
pub(crate) async fn asset(served: web::Data<Served>, file: web::Path<String>) -> HttpResponse {
    match utoipa_swagger_ui::serve(&file, Arc::clone(&served.config)) {
        Ok(Some(found)) => HttpResponse::Ok()
            .content_type(found.content_type)
            .body(found.bytes.into_owned()),
        Ok(None) => HttpResponse::NotFound().finish(),
        Err(error) => {
            tracing::error!(%error, file = %file, "a Swagger UI file could not be served");
            HttpResponse::InternalServerError().finish()
        }
    }
}

/// The page: Swagger UI over `/openapi.json`, "Try it out" on, every request
/// but the document's own sent to `public_port` on the page's host.
fn page(public_port: u16) -> String {
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>items-service API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>
const api = location.protocol + "//" + location.hostname + ":{public_port}";
window.ui = SwaggerUIBundle({{
  url: "{OPENAPI_PATH}",
  dom_id: "#swagger-ui",
  deepLinking: true,
  tryItOutEnabled: true,
  requestInterceptor: (request) => {{
    const url = new URL(request.url, location.href);
    if (url.origin === location.origin && url.pathname !== "{OPENAPI_PATH}") {{
      request.url = api + url.pathname + url.search;
    }}
    return request;
  }},
}});
</script>
</body>
</html>
"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_sends_its_requests_to_the_public_port_and_reads_the_document_here_c11() {
        let page = page(4321);
        assert!(page.contains(r#"location.hostname + ":4321""#), "{page}");
        assert!(page.contains(r#"url: "/openapi.json""#));
        assert!(page.contains("/docs/swagger-ui-bundle.js"));
    }

    #[test]
    fn swagger_ui_files_are_built_into_the_binary_c11() {
        let config = Arc::new(Config::from(OPENAPI_PATH));
        for file in [
            "swagger-ui-bundle.js",
            "swagger-ui.css",
            "favicon-32x32.png",
        ] {
            let found = utoipa_swagger_ui::serve(file, Arc::clone(&config))
                .expect("served")
                .unwrap_or_else(|| panic!("{file} is built in"));
            assert!(found.bytes.len() > 100, "{file}");
        }
    }
}
