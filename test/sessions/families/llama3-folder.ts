// A Llama 3.1 token set for the llama3 family tests: <|eom_id|> and <|python_tag|> exist
// (Llama 3's npm tokenizer has them reserved), with Llama 3's plain template.
import type { TokenizerFolder } from "../../../sessions/tokenizer-folder.ts";
import { syntheticFolder } from "../../helpers/synthetic-tokenizer.ts";

export const LLAMA3_PLAIN_TEMPLATE =
  "{% for m in messages %}{% if loop.first %}{{ bos_token }}{% endif %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n" +
  "{{ m.content | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

let folder: TokenizerFolder | undefined;

/** The synthetic Llama 3.1 folder (made once). */
export function llama31Folder(): TokenizerFolder {
  folder ??= syntheticFolder({
    added: [
      { content: "<|begin_of_text|>", id: 1000 },
      { content: "<|end_of_text|>", id: 1001 },
      { content: "<|start_header_id|>", id: 1006 },
      { content: "<|end_header_id|>", id: 1007 },
      { content: "<|eom_id|>", id: 1008 },
      { content: "<|eot_id|>", id: 1009 },
      { content: "<|python_tag|>", id: 1010 },
    ],
    template: LLAMA3_PLAIN_TEMPLATE,
    config: { bos_token: "<|begin_of_text|>", eos_token: "<|eot_id|>" },
  });
  return folder;
}
