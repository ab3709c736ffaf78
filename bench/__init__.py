"""P-Mem's evaluation harness: scenario generators, memory arms, runners and reports that
rerun the paper's experiments (§4, Appendix B) through P-Mem's own services."""
