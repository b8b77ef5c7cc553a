//! The gRPC status a gateway failure becomes: one mapping from the gateway's
//! classes of failure to gRPC codes, for every Flight call and every part's
//! stream (HTTP has its own, to status codes).

use sluice_gateway::{Class, GatewayError};
use tonic::Status;

/// The gRPC status of a gateway failure, by what it means; the message is
/// what an HTTP client is told (it leaks no internals).
pub fn to_status(error: GatewayError) -> Status {
    use tonic::Code;
    let code = match error.class() {
        Class::Invalid => Code::InvalidArgument,
        Class::Unauthenticated => Code::Unauthenticated,
        Class::Forbidden => Code::PermissionDenied,
        Class::NotFound => Code::NotFound,
        Class::Exhausted => Code::ResourceExhausted,
        Class::Unavailable => Code::Unavailable,
        Class::TimedOut => Code::DeadlineExceeded,
        Class::Internal => Code::Internal,
    };
    Status::new(code, error.client_message())
}
