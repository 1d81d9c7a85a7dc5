// Skills interop peer (SEP-2640) on the official TypeScript SDK v2 (@modelcontextprotocol/client 2.4.0): its
// `SkillsClient` (`./ext/skills`) lists a server's skills, gets each by URI, reads every file of every skill
// (each checked by the SDK against its entry: listed, size, digest, and SKILL.md's frontmatter) and lists each
// skill's folder; then asks for a skill that is not served and for a file outside a skill.
//
// Usage: node skills_client.mjs [--modern] URL | [--modern] -- CMD [ARGS...]
//
// Prints the negotiated revision, then one line per skill (`skill URI NAME FILES BYTES`), per file read
// (`file URI SIZE DIGEST`) and per folder child (`child URI MIMETYPE`), `ok <check>` per check, `FAIL <check>:
// <why>` and exit 1 on the first failure, `skills-client: N passed, 0 failed` at the end.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { SkillsClient, SkillVerificationError } from '@modelcontextprotocol/client/ext/skills';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

let args = process.argv.slice(2);
const modern = args[0] === '--modern';
if (modern) args = args.slice(1);
let transport;
if (args[0] === '--' && args.length >= 2) {
    transport = new StdioClientTransport({ command: args[1], args: args.slice(2), stderr: 'inherit' });
} else if (args.length === 1) {
    transport = new StreamableHTTPClientTransport(new URL(args[0]));
} else {
    console.error('usage: node skills_client.mjs [--modern] URL | [--modern] -- CMD [ARGS...]');
    process.exit(2);
}

let passed = 0;
const ok = name => {
    passed += 1;
    console.log(`ok ${name}`);
};
const fail = (name, why) => {
    console.log(`FAIL ${name}: ${why}`);
    process.exit(1);
};

const client = new Client(
    { name: 'fixture-node-skills-client', version: '1.0.0' },
    modern ? { versionNegotiation: { mode: 'auto' } } : {}
);
try {
    await client.connect(transport);
    console.log(`protocol ${client.getNegotiatedProtocolVersion()}`);
    const skills = new SkillsClient(client);
    if (!skills.supported) fail('declared', JSON.stringify(client.getServerCapabilities()));
    ok('declared');

    const listing = await skills.list();
    if (listing.skills.length === 0) fail('list', 'no skills');
    for (const s of listing.skills) {
        const files = s.resources === 'dynamic' ? [] : s.resources;
        console.log(`skill ${s.uri} ${s.frontmatter.name} ${files.length} ${files.reduce((n, f) => n + f.size, 0)}`);
    }
    ok('list');

    for (const s of listing.skills) {
        const { skill } = await skills.get(s.uri);
        if (JSON.stringify(skill) !== JSON.stringify(s)) fail('get', `${s.uri}: ${JSON.stringify(skill)}`);
    }
    ok('get');

    for (const s of listing.skills) {
        for (const f of s.resources) {
            const file = await skills.read(s, f.uri);
            if (!file.verified) fail('read', `${f.uri} not verified`);
            console.log(`file ${f.uri} ${file.bytes.byteLength} ${f.digest}`);
        }
    }
    ok('read');

    if (skills.directoryRead) {
        for (const s of listing.skills) {
            const root = s.uri.slice(0, -'/SKILL.md'.length);
            const dir = await skills.readDirectory(root);
            for (const c of dir.resources) console.log(`child ${c.uri} ${c.mimeType}`);
        }
        ok('directory');
    }

    try {
        await skills.get('skill://not-served/SKILL.md');
        fail('unknown', 'a skill that is not served was returned');
    } catch (e) {
        if (e?.code !== -32602) fail('unknown', `expected -32602, got ${e?.code} ${e}`);
    }
    ok('unknown');

    try {
        await skills.read(listing.skills[0], '../elsewhere/SKILL.md');
        fail('outside', 'a file outside the skill was read');
    } catch (e) {
        if (!(e instanceof SkillVerificationError) || e.reason !== 'unlisted') fail('outside', String(e));
    }
    ok('outside');
    console.log(`skills-client: ${passed} passed, 0 failed`);
    await client.close();
} catch (e) {
    fail('error', e?.stack ?? String(e));
}
