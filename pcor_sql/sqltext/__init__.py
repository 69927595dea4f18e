"""SQL text at the bottom layer: quoting, tokens and named builders."""
