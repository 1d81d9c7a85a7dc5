//! rmcp 3.11.0 benchmark peers for purra's `bench/run.sh`; the programs are in `src/bin/`.
