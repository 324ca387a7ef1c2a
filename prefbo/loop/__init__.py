r"""The preference-elicitation loop: ask, fit, choose the next question."""
