//! TCP: the listeners, one reader and one writer task per connection, and the bounds on
//! what connections may hold.

pub mod authenticator;
pub mod connection;
pub mod dispatch;
mod gone;
mod link;
pub mod memory;
pub mod pipeline;
mod queue;
pub mod refusal;
pub mod request_log;
pub(crate) mod sendfile;
pub mod server;
pub mod session;
pub mod tls;
pub mod transport;
mod writer;

pub use server::Server;
pub use session::{Principal, SaslSession, SecurityProtocol, Session};
