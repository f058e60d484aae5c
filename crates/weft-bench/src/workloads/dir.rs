//! Dir-backend workloads (filled in once the dir backend is merged).
use anyhow::Result;

use super::Ctx;
use crate::report::Report;

pub async fn small_appends(_ctx: &mut Ctx, _report: &mut Report) -> Result<()> {
    Ok(())
}
pub async fn large_records(_ctx: &mut Ctx, _report: &mut Report) -> Result<()> {
    Ok(())
}
pub async fn mixed_tags(_ctx: &mut Ctx, _report: &mut Report) -> Result<()> {
    Ok(())
}
