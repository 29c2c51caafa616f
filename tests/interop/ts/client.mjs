// A 2026-07-28 MCP client on the official TypeScript SDK v2 (@modelcontextprotocol/client 2.4.0).
//
//   node tests/interop/ts/client.mjs <mcp-url> <tool> [json-arguments] [--elicit accept|decline|cancel]
//
// It connects pinned to protocol 2026-07-28 (versionNegotiation.mode = {pin}: a `server/discover`
// probe that must offer 2026-07-28, no fallback to the `initialize` handshake), answers the
// server's input requests through the SDK's ordinary handlers (the SDK fulfils InputRequiredResult
// rounds with them and retries the call with inputResponses + requestState), lists the tools,
// calls <tool>, and prints ONE JSON line on stdout:
//
//   {"protocolVersion", "era", "text", "isError", "elicitations", "samplings", "roots", "tools", "wire"}
//
// `wire` is every HTTP request the SDK made: {http, method (JSON-RPC), version (MCP-Protocol-Version
// header), metaVersion (params._meta protocolVersion)} — the evidence that no legacy handshake
// happened. On failure it exits non-zero with a message on stderr. The whole run is bounded.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const PINNED = '2026-07-28';
const RUN_TIMEOUT_MS = Number(process.env.MRTR_TS_CLIENT_TIMEOUT_MS ?? 20_000);
const ANSWERS = { city: 'Paris', name: 'Ann', color: 'teal' };
const SAMPLED_TEXT = 'a short summary';
const ROOTS = ['file:///tmp/project-a', 'file:///tmp/project-b'];

function parseArgs(argv) {
    const positional = [];
    let action = 'accept';
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === '--elicit') {
            action = argv[++i];
            if (!['accept', 'decline', 'cancel'].includes(action)) throw new Error(`--elicit: bad action ${action}`);
        } else {
            positional.push(argv[i]);
        }
    }
    const [url, tool, json] = positional;
    if (!url || !tool || positional.length > 3) {
        throw new Error('usage: client.mjs <mcp-url> <tool> [json-arguments] [--elicit accept|decline|cancel]');
    }
    return { url: new URL(url), tool, args: json ? JSON.parse(json) : {}, action };
}

/** A fetch that records what goes on the wire, then does the real fetch. */
function recordingFetch(wire) {
    return async (url, init = {}) => {
        const headers = new Headers(init.headers);
        let method = null;
        let metaVersion = null;
        if (typeof init.body === 'string') {
            try {
                const body = JSON.parse(init.body);
                method = body.method ?? null;
                metaVersion = body.params?._meta?.['io.modelcontextprotocol/protocolVersion'] ?? null;
            } catch {
                // not JSON: record the request without a JSON-RPC method
            }
        }
        wire.push({
            http: init.method ?? 'GET',
            method,
            version: headers.get('mcp-protocol-version'),
            metaVersion,
        });
        return fetch(url, init);
    };
}

async function run({ url, tool, args, action }) {
    const wire = [];
    const elicitations = [];
    let samplings = 0;
    let rootsCalls = 0;

    const client = new Client(
        { name: 'mrtr-ts-interop-client', version: '1.0.0' },
        {
            capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} },
            versionNegotiation: { mode: { pin: PINNED } },
            inputRequired: { autoFulfill: true, maxRounds: 10 },
        },
    );
    client.setRequestHandler('elicitation/create', async (request) => {
        const params = request.params;
        elicitations.push(params.message);
        if (action !== 'accept') return { action };
        const fields = Object.keys(params.requestedSchema?.properties ?? {});
        if (fields.length !== 1 || !(fields[0] in ANSWERS)) {
            throw new Error(`no canned answer for schema ${JSON.stringify(params.requestedSchema)}`);
        }
        return { action: 'accept', content: { [fields[0]]: ANSWERS[fields[0]] } };
    });
    client.setRequestHandler('sampling/createMessage', async () => {
        samplings += 1;
        return { role: 'assistant', content: { type: 'text', text: SAMPLED_TEXT }, model: 'test-model' };
    });
    client.setRequestHandler('roots/list', async () => {
        rootsCalls += 1;
        return { roots: ROOTS.map((uri) => ({ uri })) };
    });

    const transport = new StreamableHTTPClientTransport(url, { fetch: recordingFetch(wire) });
    await client.connect(transport);
    try {
        const protocolVersion = client.getNegotiatedProtocolVersion();
        const era = client.getProtocolEra();
        if (protocolVersion !== PINNED || era !== 'modern') {
            throw new Error(`connected with protocol ${protocolVersion} (era ${era}), not ${PINNED}`);
        }
        const { tools } = await client.listTools();
        const result = await client.callTool({ name: tool, arguments: args });
        const text = (result.content ?? [])
            .filter((block) => block.type === 'text')
            .map((block) => block.text)
            .join(' ');
        return {
            protocolVersion,
            era,
            text,
            isError: Boolean(result.isError),
            elicitations,
            samplings,
            roots: rootsCalls,
            tools: tools.map((t) => t.name),
            wire,
        };
    } finally {
        await client.close();
    }
}

async function main() {
    const options = parseArgs(process.argv.slice(2));
    let timer;
    const deadline = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${RUN_TIMEOUT_MS} ms`)), RUN_TIMEOUT_MS);
    });
    try {
        const output = await Promise.race([run(options), deadline]);
        process.stdout.write(JSON.stringify(output) + '\n');
    } finally {
        clearTimeout(timer);
    }
}

main().then(
    () => process.exit(0),
    (error) => {
        console.error(`client.mjs: ${error?.stack ?? error}`);
        process.exit(1);
    },
);
