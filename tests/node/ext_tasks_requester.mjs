// Drives the workflow service as a third-party client would: the requester API of the npm
// package @modelcontextprotocol/ext-tasks (0.2.x) over a plain HTTP port to POST /mcp in the
// 2026-07-28 revision. It starts a workflow run as a task (workflow_start), answers the task's
// elicitation through the package's input handler, and prints what the execution settled to as
// one JSON line. Run by tests/e2e/test_mcp_tasks_node.py; not a test on its own.
//
//   NODE_DEPS=.node MCP_URL=... USER_BEARER=... SCOPE_BEARER=... WF_DEF_ID=... ANSWER=APPROVED \
//     node this.mjs
// NODE_DEPS: the git-ignored npm prefix .ci/run installs the package into (never global).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const CLIENT = "node_modules/@modelcontextprotocol/ext-tasks/dist/client/index.js";
const { withTasks } = await import(pathToFileURL(join(process.env.NODE_DEPS, CLIENT)).href);

const VERSION = "2026-07-28";
const EXTENSION = "io.modelcontextprotocol/tasks";
const { MCP_URL, USER_BEARER, SCOPE_BEARER, WF_DEF_ID, ANSWER } = process.env;

let nextId = 1;

function framed(request) {
  const params = request.params ?? {};
  return {
    jsonrpc: "2.0",
    id: request.id ?? nextId++,
    ...request,
    params: {
      ...params,
      _meta: {
        ...(params._meta ?? {}),
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": { name: "ext-tasks-node-test", version: "1" },
        "io.modelcontextprotocol/clientCapabilities": { extensions: { [EXTENSION]: {} } },
      },
    },
  };
}

const port = {
  endpointId: "workflow-mcp-under-test",
  taskCapabilities: { generation: "v2", capabilities: {} },
  invalidated: false,
  async dispatch(request, options) {
    const message = framed(request);
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json",
      "MCP-Protocol-Version": VERSION,
      "Mcp-Method": message.method,
      Authorization: `Bearer ${USER_BEARER}`,
      "X-Scope-Token": `Bearer ${SCOPE_BEARER}`,
      ...(options?.context?.headers ?? {}),
    };
    const named = message.params.taskId ?? message.params.name;
    if (typeof named === "string") headers["Mcp-Name"] = named;
    const response = await fetch(MCP_URL, {
      method: "POST",
      headers,
      body: JSON.stringify(message),
      signal: options?.signal,
    });
    const body = await response.json();
    if (process.env.WIRE_LOG) console.error(JSON.stringify({ sent: message, got: body }));
    if (body.error !== undefined) return { kind: "error", error: body.error };
    return { kind: "result", result: body.result };
  },
  onServerRequest() {
    return () => {};
  },
  onNotification() {
    return () => {};
  },
  onInvalidated() {
    return () => {};
  },
};

const asked = [];
const session = withTasks(port, {
  onInputRequest: async (request, context) => {
    asked.push({ kind: request.kind, message: request.params.message, scope: context.scope });
    return { action: "accept", content: { value: ANSWER } };
  },
});

try {
  const execution = await session.callTool("workflow_start", { wfDefId: WF_DEF_ID, input: {} });
  const { outcome } = await execution.settle();
  const report = { kind: execution.kind, taskId: execution.handle?.taskId, status: outcome.status, asked };
  if (outcome.status === "completed") report.result = outcome.result;
  if (outcome.status === "failed") report.error = String(outcome.error);
  console.log(JSON.stringify(report));
} finally {
  await session.close();
}
