//! Several reads of one host in one remote command: one channel, so one channel open and one
//! exec request for the whole host instead of one pair per read, and one shell started by sshd
//! instead of one per read. The output is framed so each read gets back its own stdout, stderr
//! and exit status, as if it had run alone.
//!
//! The script runs each read in a subshell (an `exit` ends only that read) one after another,
//! and after each prints a frame line `\n<tag> <index> <status>\n` on stdout and
//! `\n<tag> <index>\n` on stderr. `tag` is random per batch, so no file a read prints can close a
//! frame by accident. sshd runs an exec request as `$SHELL -c COMMAND` (openssh-portable
//! `session.c`, `do_child`), so the script needs only POSIX sh: VyOS's `/bin/vbash` is a bash.

use sha2::Digest;

use super::shell::Sh;
use super::ssh::Output;
use crate::sh;

/// A random tag for one batch's frames (hex of 16 bytes of the system's random source).
pub fn new_tag() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        // No /dev/urandom: the clock and the pid still make a tag no file holds by accident.
        let seed = format!("{:?} {}", std::time::SystemTime::now(), std::process::id());
        bytes.copy_from_slice(&sha2::Sha256::digest(seed.as_bytes())[..16]);
    }
    format!("fabric-frame-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The script that runs `reads` in order, each framed with `tag`.
pub fn script(reads: &[Sh], tag: &str) -> Sh {
    let mut out = Sh::lit("");
    for (i, read) in reads.iter().enumerate() {
        let frame = sh!(
            "( {} ) </dev/null; printf '\\n%s %s %s\\n' {} {} \"$?\"; printf '\\n%s %s\\n' {} {} >&2\n",
            read.clone(),
            tag,
            i,
            tag,
            i
        );
        out = sh!("{}{}", out, frame);
    }
    out
}

/// Why a batch's output could not be split into its reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer stops before read {index} of {count} finished (the shell or the connection ended early)")]
pub struct CutShort {
    pub index: usize,
    pub count: usize,
}

/// Splits the output of [`script`] with `tag` into the `count` reads' own outputs.
pub fn split(o: &Output, tag: &str, count: usize) -> Result<Vec<Output>, CutShort> {
    let mut out = Vec::with_capacity(count);
    let (mut stdout, mut stderr) = (&o.stdout[..], &o.stderr[..]);
    for index in 0..count {
        let cut = CutShort { index, count };
        let marker = format!("\n{tag} {index} ");
        let at = find(stdout, marker.as_bytes()).ok_or(cut.clone())?;
        let rest = &stdout[at + marker.len()..];
        let eol = rest.iter().position(|&b| b == b'\n').ok_or(cut.clone())?;
        let status = std::str::from_utf8(&rest[..eol]).ok().and_then(|s| s.parse::<u32>().ok()).ok_or(cut.clone())?;
        let own_out = stdout[..at].to_vec();
        stdout = &rest[eol + 1..];
        let marker = format!("\n{tag} {index}\n");
        let at = find(stderr, marker.as_bytes()).ok_or(cut)?;
        let own_err = stderr[..at].to_vec();
        stderr = &stderr[at + marker.len()..];
        out.push(Output { status, stdout: own_out, stderr: own_err });
    }
    Ok(out)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_locally(script: &Sh) -> Output {
        let o = std::process::Command::new("sh").arg("-c").arg(script.as_str()).output().expect("run sh");
        Output { status: o.status.code().unwrap_or(255) as u32, stdout: o.stdout, stderr: o.stderr }
    }

    #[test]
    fn the_script_is_exact() {
        let s = script(&[Sh::lit("cat /x"), Sh::lit("exit 3")], "T");
        assert_eq!(
            s,
            "( cat /x ) </dev/null; printf '\\n%s %s %s\\n' T 0 \"$?\"; printf '\\n%s %s\\n' T 0 >&2\n\
             ( exit 3 ) </dev/null; printf '\\n%s %s %s\\n' T 1 \"$?\"; printf '\\n%s %s\\n' T 1 >&2\n"
        );
    }

    #[test]
    fn each_read_gets_back_its_own_output_and_status() {
        let reads = [
            Sh::lit("printf 'a\\nb\\n'"),
            // No newline at the end, an error on stderr, and an exit that ends only this read.
            Sh::lit("printf 'no newline'; echo oops >&2; exit 3"),
            Sh::lit("true"),
            Sh::lit("printf '\\n\\n'"),
        ];
        let tag = new_tag();
        let parts = split(&run_locally(&script(&reads, &tag)), &tag, reads.len()).unwrap();
        let got: Vec<(u32, String, String)> =
            parts.iter().map(|o| (o.status, String::from_utf8_lossy(&o.stdout).into_owned(), o.stderr_str())).collect();
        assert_eq!(
            got,
            [
                (0, "a\nb\n".to_string(), String::new()),
                (3, "no newline".to_string(), "oops".to_string()),
                (0, String::new(), String::new()),
                (0, "\n\n".to_string(), String::new()),
            ]
        );
    }

    #[test]
    fn a_read_cannot_eat_the_script_nor_fake_another_tag() {
        let tag = new_tag();
        assert_ne!(tag, new_tag(), "a tag per batch");
        // `cat` with no file reads stdin: it gets nothing, the next read still runs.
        let reads = [Sh::lit("cat"), Sh::lit("printf '\\nfabric-frame-0 1 0\\n'"), Sh::lit("echo last")];
        let parts = split(&run_locally(&script(&reads, &tag)), &tag, 3).unwrap();
        assert_eq!(parts[1].stdout, b"\nfabric-frame-0 1 0\n");
        assert_eq!(parts[2].stdout, b"last\n");
    }

    #[test]
    fn an_answer_cut_short_is_an_error_naming_the_read() {
        let tag = new_tag();
        let mut o = run_locally(&script(&[Sh::lit("echo a"), Sh::lit("echo b")], &tag));
        let whole = o.stdout.clone();
        o.stdout.truncate(whole.len() - 5);
        assert_eq!(split(&o, &tag, 2).err(), Some(CutShort { index: 1, count: 2 }));
        o.stdout = whole;
        o.stderr.clear();
        assert_eq!(split(&o, &tag, 2).err(), Some(CutShort { index: 0, count: 2 }));
    }
}
