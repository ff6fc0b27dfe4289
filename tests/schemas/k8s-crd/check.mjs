// Checks prometheus-operator objects against the operator's CRD schemas.
//
//   node tests/schemas/k8s-crd/check.mjs FILE.yaml...
//
// Each YAML document (apiVersion monitoring.coreos.com/v1) is
//  1. validated by @kubernetes-models/prometheus-operator's validator for its
//     kind: ajv, compiled from the CRD's openAPIV3Schema, the schema the
//     API server enforces (types, required fields, enums, patterns);
//  2. typed as that package's interface in a TypeScript file and checked by
//     tsc: an object literal with a key the type does not have fails
//     (excess-property check), as `kubectl apply --validate=strict` fails on
//     a field the CRD does not declare (the ajv schema alone accepts them;
//     the API server would silently prune them).
// Exit status 0 when every document passes, 1 with each problem otherwise.
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: check.mjs FILE.yaml...");
  process.exit(2);
}
const problems = [];
const typed = [];
for (const file of files) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  docs.forEach((doc, i) => {
    if (doc.errors.length) {
      problems.push(`${file}#${i}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      return;
    }
    const obj = doc.toJS();
    if (obj === null) return;
    const [group, version] = String(obj.apiVersion).split("/");
    if (group !== "monitoring.coreos.com") {
      problems.push(`${file}#${i}: apiVersion ${obj.apiVersion}: not a prometheus-operator object`);
      return;
    }
    typed.push({ file, i, version, kind: obj.kind, obj });
  });
}
for (const t of typed) {
  const mod = await import(`@kubernetes-models/prometheus-operator/monitoring.coreos.com/${t.version}/${t.kind}`)
    .catch(() => null);
  const Model = mod && mod[t.kind];
  if (!Model) {
    problems.push(`${t.file}#${t.i}: ${t.kind} ${t.version}: no such kind in the operator's API`);
    continue;
  }
  try {
    new Model(t.obj).validate();
  } catch (e) {
    problems.push(`${t.file}#${t.i}: ${t.kind}: ${e.message}`);
  }
}
if (typed.length) {
  const dir = mkdtempSync(join(tmpdir(), "pptune-crd-"));
  try {
    const lines = typed.map((t, n) =>
      `import type { I${t.kind} as T${n} } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/${t.version}/${t.kind}";\n` +
      `// ${t.file} document ${t.i}\nexport const d${n}: T${n} = ${JSON.stringify(t.obj, null, 2)};\n`);
    const src = join(dir, "objects.ts");
    writeFileSync(src, lines.join("\n"));
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({
      compilerOptions: {
        strict: true, noEmit: true, module: "nodenext", moduleResolution: "nodenext",
        target: "es2022", skipLibCheck: true, typeRoots: [], types: [],
        baseUrl: here, paths: { "*": [join(here, "node_modules", "*")] },
      },
      files: [src],
    }));
    try {
      execFileSync(join(here, "node_modules", ".bin", "tsc"), ["-p", dir], { encoding: "utf8" });
    } catch (e) {
      problems.push(`unknown or mistyped fields (tsc on the operator's types):\n${e.stdout}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
if (problems.length) {
  for (const p of problems) console.error(p);
  process.exit(1);
}
console.log(`${typed.length} object(s) valid against the prometheus-operator CRD schemas`);
