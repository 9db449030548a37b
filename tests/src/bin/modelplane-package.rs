//! `modelplane-package build [--out DIR]` assembles each Crossplane package's `package.yaml`;
//! `modelplane-package check [--strict]` validates packages and examples (see `modelplane_tests::package::check`).

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::{Parser, Subcommand};
use modelplane_tests::{
    manifest::{Problem, Severity},
    package,
};

#[derive(Parser)]
#[command(
    name = "modelplane-package",
    about = "Build and check Modelplane's Crossplane packages"
)]
struct Cli {
    /// Repository root (default: the nearest directory upwards holding `package/`).
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write `<out>/<package>/package.yaml` for every package (the input of `crossplane xpkg build
    /// --package-root=<out>/<package>`).
    Build {
        #[arg(long, default_value = "target/packages")]
        out: PathBuf,
    },
    /// Validate packages, schemas, Compositions and examples. Exits 1 on any error.
    Check {
        /// Treat kinds and CRDs that do not exist yet as errors.
        #[arg(long)]
        strict: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Some(root) = cli.root.or_else(find_root) else {
        eprintln!("error: no package/ directory here or above; pass --root");
        return ExitCode::from(2);
    };
    match cli.command {
        Command::Build { out } => match package::build(&root, &out) {
            Ok(files) => {
                files.iter().for_each(|f| println!("wrote {}", f.display()));
                ExitCode::SUCCESS
            }
            Err(problems) => report(&problems, true),
        },
        Command::Check { strict } => {
            let problems = package::check(&root);
            let code = report(&problems, strict);
            if code == ExitCode::SUCCESS {
                println!("packages and examples under {} are valid", root.display());
            }
            code
        }
    }
}

fn report(problems: &[Problem], strict: bool) -> ExitCode {
    let mut failed = false;
    for p in problems {
        let fatal = strict || p.severity == Severity::Error;
        failed |= fatal;
        eprintln!("{}: {p}", if fatal { "error" } else { "missing" });
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn find_root() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .find(|dir| dir.join("package").is_dir())
        .map(Path::to_path_buf)
}
