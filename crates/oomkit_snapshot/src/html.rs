pub fn write(
    _r: &crate::Report,
    _name: &str,
    _out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    Ok(())
}
