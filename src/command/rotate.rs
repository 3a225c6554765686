//! `fabric rotate`: renew what fabric made on the targets, each kind by its own subcommand.

use clap::{Args, Subcommand};
use miette::Report;

use super::Done;
use crate::command::args::Global;

/// Renew keys and credentials fabric made, shown first and applied like an apply
#[derive(Debug, Args)]
pub struct Opts {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, Subcommand)]
pub enum What {
    Wireguard(super::rotate_wireguard::Opts),
    Credentials(super::rotate_credentials::Opts),
}

pub fn run(g: &Global, o: Opts) -> Result<Done, Report> {
    match o.what {
        What::Wireguard(o) => super::rotate_wireguard::run(g, o),
        What::Credentials(o) => super::rotate_credentials::run(g, o),
    }
}
