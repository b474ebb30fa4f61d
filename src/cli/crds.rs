//! `clusterstack crds`: the CRDs as YAML.

use std::io::Write;
use std::path::PathBuf;

use crate::api;

use super::CliError;

#[derive(Debug, clap::Args)]
pub struct CrdsArgs {
    /// Write one file per CRD (`<group>_<plural>.yaml`) into this directory
    /// instead of printing one multi-document stream.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

pub fn run(args: CrdsArgs) -> Result<(), CliError> {
    let write_err = |path: String| move |source| CliError::Write { path, source };
    match args.dir {
        None => {
            let yaml = api::crds_yaml()?;
            std::io::stdout().write_all(yaml.as_bytes()).map_err(write_err("standard output".into()))
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(write_err(dir.display().to_string()))?;
            for crd in api::all_crds() {
                let path = dir.join(api::crd_file_name(&crd));
                std::fs::write(&path, api::crd_yaml(&crd)?).map_err(write_err(path.display().to_string()))?;
            }
            Ok(())
        }
    }
}
