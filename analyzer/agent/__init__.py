"""`tilescope mcp`: the commands as Model Context Protocol tools for coding agents (issue #29).

`tools` holds what each tool does, on top of the commands' own functions, with no MCP import;
`worker` runs those tools in a child process (so a cancelled call ends its work); `server` is the
MCP server over stdio (the `agent` extra, the official `mcp` SDK); `command` registers
`tilescope mcp`. docs/agents.md describes the tools, their results and their limits.
"""
