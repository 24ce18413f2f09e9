"""Operations: one module per verb. Each returns an envelope dict; none prints or exits."""
