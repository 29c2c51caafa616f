// A handshake-era MCP server on the official TypeScript SDK v1 (@modelcontextprotocol/sdk 1.32.2) that
// does what many published TypeScript servers do with roots: it asks roots/list as soon as a session
// is initialized (Server.oninitialized) and caches the answer. McpServer over a stateful
// StreamableHTTPServerTransport, one per session, like tests/interop/ts/legacy_server.mjs.
//
//   node tests/interop/ts/roots_server.mjs <port>        # serves http://127.0.0.1:<port>/mcp
//
// Tools:
//   * startup_roots - what the session-start roots/list got, WITHOUT waiting for it (the string
//     contract is tests/peers/contract.py's STARTUP_ROOTS_* / startup_roots_text);
//   * roots_before_headers - the SDK hands a request to the tool before the POST's response headers
//     go out; this tool makes that ordering certain: it sends roots/list (unrelated, so on the GET
//     stream) first, and the POST's headers are held back until that request is answered (or
//     HEADERS_HOLD_MS pass). A client that only owns the session once it sees the headers refuses it.
//   * add - needs nothing from the client.
import { randomUUID } from 'node:crypto';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const STARTUP_ROOTS_PENDING = 'startup-roots=<not answered yet>';
const STARTUP_ROOTS_FAILED = 'startup-roots=<refused>';
const HEADERS_HOLD_MS = 1000;

const port = Number.parseInt(process.argv[2] ?? '', 10);
if (!Number.isInteger(port) || port <= 0) {
    console.error('usage: node roots_server.mjs <port>');
    process.exit(2);
}

const text = (value) => ({ content: [{ type: 'text', text: value }] });
const uris = (result) => result.roots.map((root) => root.uri).join(',');

/** JSON-RPC id of a held tools/call -> release(): lets its response headers go out. */
const heldHeaders = new Map();

function buildServer() {
    const mcp = new McpServer({ name: 'mrtr-ts-roots-peer', version: '1.0.0' });
    let startup = STARTUP_ROOTS_PENDING;

    mcp.server.oninitialized = () => {
        mcp.server.listRoots().then(
            (result) => {
                startup = `startup-roots=${uris(result)}`;
            },
            () => {
                startup = STARTUP_ROOTS_FAILED;
            },
        );
    };

    mcp.registerTool('startup_roots', { description: 'The roots this session got when it started (no wait).' }, async () =>
        text(startup),
    );

    mcp.registerTool(
        'roots_before_headers',
        { description: 'roots/list on the GET stream before the POST response headers are sent.' },
        async (extra) => {
            const asked = mcp.server.listRoots();
            const release = heldHeaders.get(extra.requestId) ?? (() => {});
            const timer = setTimeout(release, HEADERS_HOLD_MS);
            try {
                return text(`roots=${uris(await asked)}`);
            } catch (error) {
                return text(`roots-refused=${error.message}`);
            } finally {
                clearTimeout(timer);
                release();
            }
        },
    );

    mcp.registerTool(
        'add',
        { description: 'Add two integers; needs no client input.', inputSchema: { a: z.number().int(), b: z.number().int() } },
        async ({ a, b }) => text(String(a + b)),
    );

    return mcp;
}

/** Queue everything written to ``res`` until the returned release() is called. */
function holdResponse(res) {
    const queued = [];
    let open = false;
    for (const name of ['writeHead', 'flushHeaders', 'write', 'end']) {
        const original = res[name].bind(res);
        res[name] = (...args) => {
            if (open) return original(...args);
            queued.push(() => original(...args));
            return name === 'write' ? true : res;
        };
    }
    return () => {
        if (open) return;
        open = true;
        for (const replay of queued.splice(0)) replay();
    };
}

const app = createMcpExpressApp({ host: '127.0.0.1' });
const transports = new Map();

const jsonRpcError = (res, status, code, message) =>
    res.status(status).json({ jsonrpc: '2.0', error: { code, message }, id: null });

app.post('/mcp', async (req, res) => {
    const sessionId = req.headers['mcp-session-id'];
    try {
        let transport = sessionId ? transports.get(sessionId) : undefined;
        if (!transport) {
            if (sessionId) return jsonRpcError(res, 404, -32001, 'Session not found');
            if (!isInitializeRequest(req.body)) {
                return jsonRpcError(res, 400, -32000, 'Bad Request: No valid session ID provided');
            }
            transport = new StreamableHTTPServerTransport({
                sessionIdGenerator: () => randomUUID(),
                onsessioninitialized: (id) => transports.set(id, transport),
            });
            transport.onclose = () => {
                if (transport.sessionId) transports.delete(transport.sessionId);
            };
            await buildServer().connect(transport);
        }
        const body = req.body;
        if (body?.method === 'tools/call' && body.params?.name === 'roots_before_headers') {
            const release = holdResponse(res);
            heldHeaders.set(body.id, release);
            res.on('close', () => heldHeaders.delete(body.id));
        }
        await transport.handleRequest(req, res, body);
    } catch (error) {
        console.error('error handling POST /mcp:', error);
        if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Internal server error');
    }
});

const sessionRequest = async (req, res) => {
    const transport = transports.get(req.headers['mcp-session-id']);
    if (!transport) return jsonRpcError(res, req.headers['mcp-session-id'] ? 404 : 400, -32000, 'Unknown or missing session');
    await transport.handleRequest(req, res);
};
app.get('/mcp', sessionRequest);
app.delete('/mcp', sessionRequest);

const httpServer = app.listen(port, '127.0.0.1', (error) => {
    if (error) {
        console.error(error);
        process.exit(1);
    }
    console.error(`ts roots peer on http://127.0.0.1:${port}/mcp`);
});

const shutdown = () => {
    for (const transport of transports.values()) transport.close().catch(() => {});
    httpServer.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
