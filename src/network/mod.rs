//! TCP: the listener and one task per connection.

pub mod connection;
pub mod dispatch;
mod sendfile;
pub mod server;

pub use server::Server;
