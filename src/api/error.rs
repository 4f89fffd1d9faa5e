//! Every way an API request can fail, and the one match from error to HTTP
//! status ([`ApiError::status`]).

use hyper::StatusCode;
use serde_json::Value as J;

use crate::api::MAX_BODY;
use crate::intake::api::WriteError;
use crate::store::StoreError;

/// An API request that could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed (not JSON, a bad query).
    #[error("{0}")]
    BadRequest(String),
    /// No token, or the wrong one.
    #[error("{0}")]
    Unauthorized(String),
    /// No such module or route.
    #[error("{0}")]
    NotFound(String),
    /// The route exists, the method does not.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// The write conflicts with another source of the module.
    #[error("{0}")]
    Conflict(String),
    /// The body is over [`MAX_BODY`].
    #[error("request body over {MAX_BODY} bytes")]
    TooLarge,
    /// Well-formed, but not a valid intention or setting.
    #[error("{field}: {message}")]
    Invalid {
        /// The field at fault.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// What is asked needs the engine, and the loop could not reach it.
    #[error("{0}")]
    Unavailable(String),
}

impl From<crate::reload::file::FileError> for ApiError {
    fn from(e: crate::reload::file::FileError) -> Self {
        use crate::model::reload::RequestError;
        use crate::reload::file::FileError;
        match e {
            FileError::NoModule(_) => ApiError::NotFound(e.to_string()),
            FileError::NoUpdate(_) => ApiError::Invalid {
                field: "module".into(),
                message: e.to_string(),
            },
            FileError::Invalid(RequestError::Invalid { field, message }) => ApiError::Invalid {
                field: field.into(),
                message,
            },
            FileError::Invalid(other) => ApiError::Conflict(other.to_string()),
            FileError::Store(s) => ApiError::Store(s),
        }
    }
}

impl ApiError {
    /// The HTTP status of each error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The JSON body of the error.
    pub fn body(&self) -> J {
        let error = match self {
            ApiError::Invalid { field, message } => crate::views::ErrorDetail {
                field: Some(field.to_string()),
                message: message.clone(),
                status: self.status().as_u16(),
            },
            _ => crate::views::ErrorDetail {
                field: None,
                message: self.to_string(),
                status: self.status().as_u16(),
            },
        };
        super::to_json(crate::views::ErrorView { error })
    }
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::NotFound(m) => ApiError::NotFound(format!("no module {m:?}")),
            WriteError::NotYours(n) => ApiError::Conflict(n.0),
            WriteError::Invalid { field, message } => ApiError::Invalid { field, message },
            WriteError::Store(s) => ApiError::Store(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_its_status() {
        let cases = [
            (ApiError::BadRequest("x".into()), 400),
            (ApiError::Unauthorized("x".into()), 401),
            (ApiError::NotFound("x".into()), 404),
            (ApiError::MethodNotAllowed, 405),
            (ApiError::Conflict("x".into()), 409),
            (ApiError::TooLarge, 413),
            (
                ApiError::Invalid {
                    field: "f".into(),
                    message: "m".into(),
                },
                422,
            ),
            (ApiError::Unavailable("x".into()), 503),
        ];
        for (e, code) in cases {
            assert_eq!(e.status().as_u16(), code, "{e}");
            assert_eq!(e.body()["error"]["status"], code);
        }
        let e = ApiError::Invalid {
            field: "mounts[0].target".into(),
            message: "must be absolute".into(),
        };
        assert_eq!(e.body()["error"]["field"], "mounts[0].target");
    }

    #[test]
    fn an_error_s_body_is_the_text_0_6_0_wrote() {
        let invalid = ApiError::Invalid {
            field: "mounts[0].target".into(),
            message: "must be absolute".into(),
        };
        // (error, its body as 0.6.0 wrote it, compact)
        #[rustfmt::skip]
        let cases = [
            (ApiError::NotFound("no module \"x\"".into()), r#"{"error":{"message":"no module \"x\"","status":404}}"#),
            (ApiError::MethodNotAllowed, r#"{"error":{"message":"method not allowed","status":405}}"#),
            (invalid, r#"{"error":{"field":"mounts[0].target","message":"must be absolute","status":422}}"#),
        ];
        for (e, want) in cases {
            assert_eq!(e.body().to_string(), want, "{e}");
        }
    }
}
