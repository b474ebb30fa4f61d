//! Table tests of the template engine against Go's documented behaviour.
