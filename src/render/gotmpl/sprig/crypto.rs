//! stub

use crate::render::gotmpl::func::FuncMap;

pub(super) fn register(_m: &mut FuncMap) {}
