//! Authorization: the [`authorizer::Authorizer`] trait every check goes through (allow-all
//! unless one is installed), what each API declares it needs ([`needs`]), the helpers
//! handlers check with ([`helper`]), and the authorized-operations bit fields clients
//! are told.

pub mod acl;
pub mod acl_authorizer;
pub mod acl_index;
pub mod authorizer;
pub mod decisions;
pub mod helper;
pub mod needs;
pub mod operations;
pub mod settings;
pub mod store_log;
pub mod store_zk;
