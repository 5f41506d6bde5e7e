#!/usr/bin/env python3
"""An independent forward pass over an `lmtrain export --format hf` directory, built from its config.json
and model.safetensors alone (read by the format's spec with numpy): GPT-2 (Conv1D weights are (in, out);
erf GELU; a tied head reads logits through wte) or GPT-NeoX (rotate-half rotary on every head dimension,
query_key_value head by head, sequential residuals), compared with `lmtrain inspect probs --json` of the
same checkpoint: for every position, the probability of the actual next token and of the top alternatives.
Exits 1 when any differs by more than --tol (default 1e-5). Needs python3-torch and python3-numpy only.

With --transformers it instead loads the directory with transformers' AutoModelForCausalLM and
AutoTokenizer (where transformers is installed) and also checks that the tokenizer gives lmtrain's ids.

Usage: scripts/check_hf_export.py DIR PROBS_JSON [--tol 1e-5] [--text TEXT --transformers]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_safetensors  # noqa: E402 - the spec reader beside this script
from check_forward import worst_difference  # noqa: E402


def read_weights(path):
    """{name: float32 torch tensor} of a model.safetensors."""
    tensors, _ = read_safetensors.read(path)
    return {name: torch.from_numpy(array.copy()) for name, (_, array) in tensors.items()}


def gpt2_log_probs(cfg, w, ids):
    """log p(next | prefix) for every position of ids (1-D list) -> (T, V) float64."""
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    eps = cfg["layer_norm_epsilon"]
    assert cfg["activation_function"] == "gelu", cfg["activation_function"]
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][: len(ids)]  # (T,C)
    T = x.shape[0]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(L):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: x @ W(in,out) + b
        q, k, v = (t.view(T, H, C // H).transpose(0, 1) for t in qkv.split(C, dim=1))  # (H,T,D)
        att = (q @ k.transpose(1, 2)) / (C // H) ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])  # erf GELU
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    head = w["transformer.wte.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return (x @ head.t()).double().log_softmax(-1)


def neox_log_probs(cfg, w, ids):
    """GPTNeoXForCausalLM with sequential residuals and full rotary (rotary_pct 1): log p(next | prefix) for
    every position of ids -> (T, V) float64. query_key_value rows are head by head, each [q | k | v]."""
    C, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    D, eps, base = C // H, cfg["layer_norm_eps"], cfg["rotary_emb_base"]
    assert cfg["hidden_act"] == "gelu" and cfg["rotary_pct"] == 1.0 and not cfg["use_parallel_residual"], cfg
    x = w["gpt_neox.embed_in.weight"][ids]  # (T,C)
    T = x.shape[0]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))  # (D/2)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (T,D/2)
    cos, sin = torch.cat([angle.cos()] * 2, -1).float(), torch.cat([angle.sin()] * 2, -1).float()  # (T,D)

    def rotate(t):  # (H,T,D): t cos + rotate_half(t) sin, rotate_half(t) = [-t2, t1]
        t1, t2 = t[..., : D // 2], t[..., D // 2:]
        return t * cos + torch.cat([-t2, t1], -1) * sin

    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(L):
        p = f"gpt_neox.layers.{i}."
        h = F.layer_norm(x, (C,), w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
        qkv = (h @ w[p + "attention.query_key_value.weight"].t() + w[p + "attention.query_key_value.bias"])
        qkv = qkv.view(T, H, 3, D).permute(2, 1, 0, 3)  # (3,H,T,D)
        q, k, v = rotate(qkv[0]), rotate(qkv[1]), qkv[2]
        att = (q @ k.transpose(1, 2)) / D ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + y @ w[p + "attention.dense.weight"].t() + w[p + "attention.dense.bias"]
        h = F.layer_norm(x, (C,), w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"], eps)
        h = F.gelu(h @ w[p + "mlp.dense_h_to_4h.weight"].t() + w[p + "mlp.dense_h_to_4h.bias"])
        x = x + h @ w[p + "mlp.dense_4h_to_h.weight"].t() + w[p + "mlp.dense_4h_to_h.bias"]
    x = F.layer_norm(x, (C,), w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"], eps)
    head = w["gpt_neox.embed_in.weight"] if cfg["tie_word_embeddings"] else w["embed_out.weight"]
    return (x @ head.t()).double().log_softmax(-1)


def transformers_log_probs(directory, ids):
    from transformers import AutoModelForCausalLM  # only where transformers is installed
    model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().log_softmax(-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("probs_json")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--transformers", action="store_true")
    ap.add_argument("--text", help="with --transformers: text whose ids the exported tokenizer must reproduce")
    args = ap.parse_args()
    cfg = json.load(open(f"{args.dir}/config.json"))
    rows = json.load(open(args.probs_json))
    ids = [cfg["eos_token_id"]] + [r["next_id"] for r in rows]  # lmtrain starts a text with </s>
    with torch.no_grad():
        if args.transformers:
            logp = transformers_log_probs(args.dir, ids)
        else:
            forward = neox_log_probs if cfg["model_type"] == "gpt_neox" else gpt2_log_probs
            logp = forward(cfg, read_weights(f"{args.dir}/model.safetensors"), ids)
    worst = worst_difference(logp, rows)
    print(f"{len(rows)} positions: max |p_{cfg['model_type']} - p_lmtrain| = {worst:.3g} (tolerance {args.tol:g})")
    if args.transformers and args.text is not None:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(args.dir)
        got = tok(args.text)["input_ids"]
        print("tokenizer ids", "match" if got == ids[1:] else f"differ: {got} vs {ids[1:]}")
        if got != ids[1:]:
            return 1
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
