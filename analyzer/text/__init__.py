"""Text every layer writes with: escaping of untrusted text for each output (escape), the one
formatter of numbers, times, bytes and shares (words), the terminal's width and colours (terminal).
Below the input and analysis layers, so that a parser or a rule formats a value as every view does."""
