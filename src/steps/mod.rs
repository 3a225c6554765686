//! The seed's steps, one module each: what a step makes, its check after apply and its `verify`.

pub mod verify;
