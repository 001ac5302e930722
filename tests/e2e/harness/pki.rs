//! A private CA and a server certificate it signed, made for a test with the `openssl` command
//! (Debian's package, which `tests/run.sh` installs).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA and a server certificate for `localhost` / 127.0.0.1 signed by it.
pub struct Pki {
    /// The CA certificate (PEM).
    pub ca: PathBuf,
    /// The server certificate (PEM), for `localhost` and 127.0.0.1.
    pub cert: PathBuf,
    /// The server's private key (PEM).
    pub key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    crate::process::succeeded(
        Command::new("openssl").args(args).current_dir(dir),
        &format!("openssl {args:?}"),
    );
}

/// Makes a CA and a server certificate signed by it in `dir`, with the `openssl` command.
pub fn make_pki(dir: &Path) -> Pki {
    std::fs::write(
        dir.join("san.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap_or_else(|err| panic!("writing san.cnf: {err}"));
    let new_key = ["-newkey", "rsa:2048", "-nodes", "-days", "2"];
    openssl(
        dir,
        &[
            &["req", "-x509"],
            &new_key[..],
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-subj",
                "/CN=candor-e2e-ca",
            ],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            &["req"],
            &new_key[..2],
            &["-nodes", "-keyout", "server.key", "-out", "server.csr"],
            &["-subj", "/CN=localhost"],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
            "-out",
            "server.crt",
        ],
    );
    Pki {
        ca: dir.join("ca.crt"),
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
    }
}
