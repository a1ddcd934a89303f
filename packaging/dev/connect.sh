# Sourced by packaging/dev/up to say how to connect, and by the end-to-end
# suite (tests/integration/test_e2e.py), which runs exactly what it prints.
# The Inspector version is the one tests/mcp/package-lock.json pins.

# inspector_cli LISTEN TOKEN_FILE: the MCP Inspector CLI listing the tools,
# sending the credential as a header (Node 22.19 or later).
inspector_cli() {
	printf '%s\n' "  npx -y @modelcontextprotocol/inspector@2.12.0 --cli \\" \
	    "      http://$1/mcp --transport http \\" \
	    "      --header \"Authorization: Bearer \$(cat $2)\" --method tools/list"
}

# stdio_cli TOP LISTEN TOKEN_FILE: the same through mcpvm-stdio, for
# clients that cannot send a header (stdio only, or an older Node).
stdio_cli() {
	printf '%s\n' "  npx -y @modelcontextprotocol/inspector@0.15.0 --cli \\" \
	    "      $1/mcpd/mcpvm-stdio --endpoint http://$2 --token-file $3 \\" \
	    "      --method tools/list"
}
