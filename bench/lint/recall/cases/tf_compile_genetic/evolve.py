# recall case: tensorflow/tensorflow#26108 (a genetic algorithm compiling models in a loop)
# bug: `model.compile` in a loop leaks about 20 MB per call until memory is exhausted;
#      the fix in the thread is to compile once (or clear the session between models).
# reproduction written here (the pattern, not the project's code); the loop follows the code quoted in the issue.
# expect: OOM115
import tensorflow as tf

model = tf.keras.models.Sequential(
    [
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(512, activation=tf.nn.relu),
        tf.keras.layers.Dense(10, activation=tf.nn.softmax),
    ]
)

for i in range(100000):
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])  # bug
