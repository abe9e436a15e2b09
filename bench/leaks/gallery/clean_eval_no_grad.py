# leaks: clean
"""Clean: an evaluation loop under torch.no_grad() over a DataLoader that keeps
only Python floats and ints."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
data = torch.utils.data.TensorDataset(torch.randn(30 * 64, 128), torch.randint(0, 10, (30 * 64,)))
loader = torch.utils.data.DataLoader(data, batch_size=64)
model.eval()
losses = []
correct = 0
with torch.no_grad():
    for x, y in loader:
        logits = model(x)
        losses.append(nn.functional.cross_entropy(logits, y).item())
        correct += (logits.argmax(1) == y).sum().item()
print(f"eval loss {sum(losses) / len(losses):.4f}, accuracy {correct / len(data):.3f}")
