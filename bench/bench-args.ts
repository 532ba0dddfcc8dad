// The flags of a benchmark script: node:util's parseArgs, strict, plus --help. A flag it
// does not know, or a value missing, prints the reason and the usage and exits 2; --help
// prints the usage and exits 0. Each script checks its own values after this.
import { parseArgs, type ParseArgsConfig } from "node:util";

type Options = NonNullable<ParseArgsConfig["options"]>;
type Config<O extends Options> = { args: string[]; strict: true; options: O & { help: { type: "boolean" } } };

export function benchArgs<const O extends Options>(
  name: string,
  usage: string,
  argv: string[],
  options: O,
): ReturnType<typeof parseArgs<Config<O>>>["values"] {
  const config: Config<O> = { args: argv, strict: true, options: { ...options, help: { type: "boolean" } } };
  let values;
  try {
    ({ values } = parseArgs(config));
  } catch (err) {
    process.stderr.write(`${name}: ${(err as Error).message}\n\n${usage}\n`);
    process.exit(2);
  }
  if ((values as { help?: boolean }).help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  return values;
}
