// A handshake-era MCP server on the official TypeScript SDK v1 (@modelcontextprotocol/sdk 1.32.2):
// McpServer over its StreamableHTTPServerTransport, stateful (session ids, SSE responses), one
// McpServer + transport per session as the SDK's own examples do. It is the TypeScript twin of
// tests/peers/legacy_fastmcp.py: same tool names, same result strings.
//
//   node tests/interop/ts/legacy_server.mjs <port>        # serves http://127.0.0.1:<port>/mcp
//
// Where its server-to-client requests travel (the point of the exercise):
//   * elicitation/create and sampling/createMessage are sent with relatedRequestId = the
//     tools/call id, so they ride that POST's SSE stream;
//   * roots/list is sent unrelated (the SDK's plain `server.listRoots()`), so it goes out on the
//     session's standalone GET stream, like mcp 1.30.0's list_roots().
import { randomUUID } from 'node:crypto';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';

const CITY_QUESTION = 'Which city?';
const NAME_QUESTION = 'What is your name?';
const colorQuestion = (name) => `Hello ${name}, which color?`;

const port = Number.parseInt(process.argv[2] ?? '', 10);
if (!Number.isInteger(port) || port <= 0) {
    console.error('usage: node legacy_server.mjs <port>');
    process.exit(2);
}

const text = (value) => ({ content: [{ type: 'text', text: value }] });

/** One string field, required: the form schema every question here uses. */
const oneField = (field) => ({
    type: 'object',
    properties: { [field]: { type: 'string' } },
    required: [field],
});

function buildServer() {
    const mcp = new McpServer({ name: 'mrtr-ts-legacy-peer', version: '1.0.0' });

    const ask = (message, field, extra) =>
        mcp.server.elicitInput(
            { mode: 'form', message, requestedSchema: oneField(field) },
            { relatedRequestId: extra.requestId },
        );

    mcp.registerTool(
        'add',
        { description: 'Add two integers; needs no client input.', inputSchema: { a: z.number().int(), b: z.number().int() } },
        async ({ a, b }) => text(String(a + b)),
    );

    mcp.registerTool('ask_city', { description: 'One form elicitation.' }, async (extra) => {
        const answer = await ask(CITY_QUESTION, 'city', extra);
        return text(answer.action === 'accept' ? `city=${answer.content.city}` : `action=${answer.action}`);
    });

    mcp.registerTool(
        'ask_two',
        { description: 'Two dependent elicitations: the second question quotes the first answer.' },
        async (extra) => {
            const first = await ask(NAME_QUESTION, 'name', extra);
            if (first.action !== 'accept') return text(`action=${first.action}`);
            const name = first.content.name;
            const second = await ask(colorQuestion(name), 'color', extra);
            if (second.action !== 'accept') return text(`action=${second.action}`);
            return text(`name=${name};color=${second.content.color}`);
        },
    );

    mcp.registerTool(
        'summarize',
        { description: 'One sampling request, related to this call.', inputSchema: { text: z.string() } },
        async ({ text: input }, extra) => {
            const result = await mcp.server.createMessage(
                {
                    messages: [{ role: 'user', content: { type: 'text', text: `Summarize: ${input}` } }],
                    maxTokens: 100,
                },
                { relatedRequestId: extra.requestId },
            );
            const sampled = result.content.type === 'text' ? result.content.text : `<${result.content.type}>`;
            return text(`sampled=${sampled}`);
        },
    );

    mcp.registerTool('show_roots', { description: 'One roots/list request (on the GET stream).' }, async () => {
        const result = await mcp.server.listRoots();
        return text('roots=' + result.roots.map((root) => root.uri).join(','));
    });

    return mcp;
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
        await transport.handleRequest(req, res, req.body);
    } catch (error) {
        console.error('error handling POST /mcp:', error);
        if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Internal server error');
    }
});

// GET (standalone SSE stream) and DELETE (session end) need a known session.
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
    console.error(`ts legacy peer on http://127.0.0.1:${port}/mcp`);
});

const shutdown = () => {
    for (const transport of transports.values()) transport.close().catch(() => {});
    httpServer.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
