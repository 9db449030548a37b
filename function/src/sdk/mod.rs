//! Small helpers over the generated messages: `request` reads, `response` writes.

pub mod request;
pub mod response;
